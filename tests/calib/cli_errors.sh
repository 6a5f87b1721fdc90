#!/usr/bin/env bash
# qtool calibrate on bad data: exit code 2 and exactly one line on stderr naming the problem.
#   cli_errors.sh QTOOL SHARED_DIR SCRATCH_DIR
set -u
QTOOL="$1"; SHARED="$2"; TMP="$3"
rm -rf "$TMP" && mkdir -p "$TMP/empty"
MODEL="$SHARED/models/digits-vit.onnx"
T="$SHARED/data/tensors"
head -c 3000 "$T/digits_calib_images.npy" > "$TMP/corrupt.npy"
status=0

expect() {  # expect FRAGMENT ARGS...
  local fragment="$1"; shift
  "$QTOOL" calibrate "$MODEL" -o "$TMP/out.json" "$@" 2>"$TMP/err" >/dev/null
  local rc=$? lines
  lines=$(wc -l <"$TMP/err")
  if [[ $rc -ne 2 || $lines -ne 1 ]] || ! grep -qF -- "$fragment" "$TMP/err"; then
    echo "FAIL: $* -> exit $rc, $lines line(s): $(cat "$TMP/err")  (wanted exit 2, one line with '$fragment')"
    status=1
  else
    echo "ok: $* -> $(cat "$TMP/err")"
  fi
}

expect "the model has no input 'pixels'" --data "pixels=$T/digits_calib_images.npy"
expect "the model wants float [batch,1,8,8]" --data "pixel_values=$T/mobilenetv2_calib6.npy"
expect "holds no test_data_set_* folders and no .npz files" --data "$TMP/empty"
expect "corrupt.npy" --data "pixel_values=$TMP/corrupt.npy"
expect "no such file or folder" --data "$TMP/missing.npy"
[[ -e "$TMP/out.json" ]] && { echo "FAIL: an output file was written despite the errors"; status=1; }
exit $status
