// Safe file access: the one place where qtool opens files it reads and writes (docs/reliability.md, "Files").
//
// Reading. InputFile opens with O_NONBLOCK (opening a FIFO cannot block), fstat()s the descriptor and accepts
//   only regular files: a FIFO, device or directory is refused up front with a BadInputError naming the path,
//   and a file over the caller's byte limit is refused before anything is read. With remember_inputs(true) (the
//   CLI) every file opened is remembered (device + inode) as an input of this process.
// Writing. AtomicFile writes to an unpredictable temporary name beside the target, created with
//   O_CREAT|O_EXCL|O_NOFOLLOW (a file or symlink planted there cannot redirect the write), fsyncs it and renames
//   it over the target. The target must be a new path or a regular file that is not an input of this process
//   (compared by device + inode, so ./x, a/../a/x, symlinks and hard links are all the same file); a device
//   node, FIFO or directory is never replaced. Until the rename the temporary name sits in a fixed-size
//   registry: the destructor removes the file on every error path (disk full included), and the handler of
//   install_cleanup_signal_handlers() unlinks it on SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGXFSZ, then re-raises the
//   signal with its default action. Only the finished file can be left behind.
// Limits. max_tensor_bytes() bounds any one tensor or file a reader loads and the bytes inflated from one
//   archive; the CLI sets it from --max-tensor-bytes.
//
// The input list, the temporary-file registry and the limit are process-wide: a signal handler can only reach
// global state, and "never overwrite what this process read" is a property of the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qtool::fileio {

// Default --max-tensor-bytes: 2 GiB, protobuf's ceiling for a whole .onnx file (so no inline weight can be
// larger) and twice the largest calibration array in use (ppocrv4-det, 200 samples of 3x640x640 float = 0.98 GB).
inline constexpr int64_t kDefaultMaxTensorBytes = int64_t{1} << 31;
int64_t max_tensor_bytes();
void set_max_tensor_bytes(int64_t bytes);  // > 0
// The BadInputError for `what` needing `bytes` (> max_tensor_bytes()): names the limit and the flag.
[[noreturn]] void throw_over_limit(const std::string& what, uint64_t bytes);

// A regular file opened for reading. `role` names it in errors: "model", "config", "tensor file", ...
class InputFile {
 public:
  InputFile(const std::filesystem::path& path, std::string_view role);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  int64_t size() const { return size_; }
  // Exactly `n` bytes at `offset`; BadInputError naming the file when it is shorter or unreadable.
  void read_at(int64_t offset, void* buf, size_t n) const;
  // `n` bytes at `offset` as a private (copy-on-write) mapping of the file: writes through the pointer never reach
  // the file. The pages come from the page cache as they are touched, so a large read costs no fresh anonymous
  // memory (whose first touch is the expensive part on virtual machines: 3 GB took 8.5 s to fault in against 0.8 s
  // mapped, docs/large-models.md). BadInputError when the file is shorter; nullptr when the system will not map it
  // (the caller reads instead, as when all 4096 mapping slots are in use). The pointer keeps the mapping alive.
  // Touching a page past the end of a file that another program truncated after the mapping was made raises SIGBUS:
  // under install_cleanup_signal_handlers() that exits 2 with one line naming the file (no temporary file left).
  std::shared_ptr<std::byte[]> map_private(int64_t offset, size_t n) const;
  // The whole file; over `max_bytes` it is refused before reading (throw_over_limit).
  std::string read_all(int64_t max_bytes) const;
  // Gives the descriptor to the caller (who closes it).
  int release();

 private:
  std::filesystem::path path_;
  std::string role_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// Whether InputFile remembers each file it opens as an input that no AtomicFile may replace. Off by default, so a
// library user may read a file and later rewrite it; the CLI turns it on: one process, one command, and no
// command may write over anything it read.
void remember_inputs(bool on);

// Whole-file reads through InputFile.
std::string read_file(const std::filesystem::path& path, std::string_view role,
                      int64_t max_bytes = max_tensor_bytes());
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path, std::string_view role,
                                       int64_t max_bytes = max_tensor_bytes());

// Declares `path` an input of this process before it is read, so that an output naming it is refused before
// any work: a regular file is remembered as InputFile would; a folder contributes the regular files under it
// (three levels deep, as the data-folder layouts go). A path that does not exist is ignored (its reader reports
// it). `role` names it in errors: "model", "--calib", "--data file", ...
void protect_input(const std::filesystem::path& path, std::string_view role);
// BadInputError unless `target` is a new path or a regular file that is no input of this process.
void check_output_target(const std::filesystem::path& target);

// A file written under a temporary name beside `target`, renamed over it by commit(); see the top of this file.
class AtomicFile {
 public:
  explicit AtomicFile(const std::filesystem::path& target);
  ~AtomicFile();  // removes the temporary file unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  int fd() const { return fd_; }
  const std::filesystem::path& temp_path() const { return temp_; }
  void write(const void* data, size_t n);
  // fsync and close; the file keeps its temporary name (commit() calls this when not done yet).
  void finish();
  // Renames the finished file over the target (checked again first) and syncs the folder.
  void commit();

 private:
  [[noreturn]] void fail(const std::string& why);
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  int slot_ = -1;
};

void write_file_atomic(const std::filesystem::path& target, std::span<const std::byte> bytes);
void write_file_atomic(const std::filesystem::path& target, std::string_view bytes);

// Installs the handler that removes live temporary files on SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGXFSZ and
// then dies of the signal (signals the process ignores stay ignored), and the SIGBUS handler: a fault inside a
// mapped input file (map_private) removes them too and exits 2 naming the file; any other SIGBUS dies as before.
// The CLI calls it once, first thing.
void install_cleanup_signal_handlers();

}  // namespace qtool::fileio
