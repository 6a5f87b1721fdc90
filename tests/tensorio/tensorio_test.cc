// Tensor files: files written by NumPy and onnx (tests/tensorio/data, from scripts/golden/gen_tensorio_fixtures.py)
// read back exactly; our files read by NumPy; every malformed-file case gives a typed error naming the file.
#include "tensorio/tensorio.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "test_paths.h"

using namespace qtool;
using namespace qtool::tensorio;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

fs::path data_dir() { return test::source_dir() / "tests/tensorio/data"; }

std::vector<char> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const fs::path& p, const std::vector<char>& b) {
  std::ofstream(p, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
}

void check_tensor(const Tensor& t, const nlohmann::json& want) {
  CHECK(dtype_name(t.dtype()) == want["dtype"].get<std::string>());
  CHECK(t.shape() == want["shape"].get<Shape>());
  const auto& vals = want["values"];
  REQUIRE(static_cast<int64_t>(vals.size()) == t.numel());
  const auto load = dtype_info(t.dtype()).load;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const auto& w = vals[static_cast<size_t>(i)];
    INFO("element " << i);
    if (w.is_string()) {
      const float v = load(t.raw(), i);
      const std::string sv = w;
      CHECK((sv == "nan" ? std::isnan(v) : v == (sv == "inf" ? INFINITY : -INFINITY)));
    } else if (t.dtype() == DType::UInt64) {
      CHECK(t.data<uint64_t>()[i] == w.get<uint64_t>());
    } else if (t.dtype() == DType::Int64) {
      CHECK(t.data<int64_t>()[i] == w.get<int64_t>());
    } else {
      CHECK(load(t.raw(), i) == static_cast<float>(w.get<double>()));
    }
  }
}

// Expects `fn` to throw an Error of `kind` whose message names `file` and contains `text`.
template <class Fn>
void expect_error(Fn&& fn, ErrorKind kind, const fs::path& file, const std::string& text) {
  try {
    fn();
    FAIL("no error for " << file);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.kind() == kind);
    CHECK_THAT(e.what(), Contains(file.string()) && Contains(text));
  }
}

}  // namespace

TEST_CASE("files written by NumPy and onnx read back exactly") {
  std::ifstream in(data_dir() / "expected.json");
  const auto expected = nlohmann::json::parse(in);
  int files = 0;
  for (const auto& [file, arrays] : expected.items()) {
    INFO(file);
    const fs::path path = data_dir() / file;
    if (path.extension() == ".npz") {
      const auto m = read_npz(path);
      CHECK(m.size() == arrays.size());
      for (const auto& [key, want] : arrays.items()) {
        REQUIRE(m.count(key) == 1);
        check_tensor(m.at(key), want);
      }
    } else if (path.extension() == ".pb") {
      std::string name;
      const Tensor t = read_pb(path, &name);
      CHECK(name == arrays.begin().key());
      check_tensor(t, arrays.begin().value());
    } else {
      check_tensor(read_npy(path), arrays.begin().value());
      check_tensor(read_tensor_file(path), arrays.begin().value());
    }
    ++files;
  }
  CHECK(files == 19);
  CHECK(read_tensor_file(data_dir() / "zip64.npz").numel() == 10);
}

TEST_CASE("written files round-trip and NumPy reads them") {
  const fs::path dir = test::scratch_dir("tensorio_write");
  const Tensor f = Tensor::from_vector<float>({2, 3}, {1, -2, 3.5f, NAN, 0, -0.0f});
  const Tensor i = Tensor::from_vector<int16_t>({4}, {-32768, 0, 1, 32767});
  const Tensor s = Tensor::scalar<double>(2.5);
  write_npy(dir / "f.npy", f);
  write_npy(dir / "i.npy", i);
  write_npy(dir / "s.npy", s);
  CHECK(read_npy(dir / "f.npy").same_as(f));
  CHECK(read_npy(dir / "i.npy").same_as(i));
  CHECK(read_npy(dir / "s.npy").same_as(s));
  write_npy(dir / "f.npy", i);  // atomic replace of an existing file, no temporary left behind
  CHECK(read_npy(dir / "f.npy").same_as(i));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  CHECK(entries == 3);
  write_npy(dir / "f.npy", f);
  write_npz(dir / "stored.npz", {{"f", f}, {"i", i}});
  write_npz(dir / "deflate.npz", {{"f", f}, {"i", i}}, true);
  for (const char* name : {"stored.npz", "deflate.npz"}) {
    const auto m = read_npz(dir / name);
    CHECK(m.at("f").same_as(f));
    CHECK(m.at("i").same_as(i));
  }
  // 4-bit and FP8 tensors have no NumPy type: .pb keeps them.
  Tensor q4 = Tensor::zeros(DType::Int4, {3});
  q4.raw()[0] = std::byte{0x9F};
  write_pb(dir / "q4.pb", q4, "w");
  std::string name;
  CHECK(read_pb(dir / "q4.pb", &name).same_as(q4));
  CHECK(name == "w");
  CHECK_THROWS_AS(write_npy(dir / "q4.npy", q4), UnsupportedError);
  write_tensor_file(dir / "f2.pb", f);
  CHECK(read_tensor_file(dir / "f2.pb").same_as(f));
  // NumPy reads what we wrote.
  const std::string py =
      "/usr/bin/python3 -c \"import numpy as np, sys; d=sys.argv[1]; "
      "f=np.load(d+'/f.npy'); assert f.dtype==np.float32 and f.shape==(2,3) and f[0,2]==3.5; "
      "assert np.load(d+'/i.npy').tolist()==[-32768,0,1,32767]; assert np.load(d+'/s.npy')==2.5; "
      "z=np.load(d+'/deflate.npz'); assert z['i'].tolist()==[-32768,0,1,32767]; "
      "z=np.load(d+'/stored.npz'); assert z['f'][1,0]!=z['f'][1,0]\" " +
      dir.string();
  CHECK(std::system(py.c_str()) == 0);
}

TEST_CASE("malformed .npy files give errors naming the file") {
  const fs::path dir = test::scratch_dir("tensorio_bad_npy");
  const std::vector<char> good = read_bytes(data_dir() / "f32_2x3.npy");
  auto variant = [&](const std::string& name, auto mutate) {
    std::vector<char> b = good;
    mutate(b);
    write_bytes(dir / name, b);
    return dir / name;
  };
  const auto magic = variant("magic.npy", [](auto& b) { b[1] = 'X'; });
  expect_error([&] { read_npy(magic); }, ErrorKind::BadInput, magic, "bad magic");
  const auto trunc = variant("trunc.npy", [](auto& b) { b.resize(40); });
  expect_error([&] { read_npy(trunc); }, ErrorKind::BadInput, trunc, "truncated .npy header");
  const auto tiny = variant("tiny.npy", [](auto& b) { b.resize(8); });
  expect_error([&] { read_npy(tiny); }, ErrorKind::BadInput, tiny, "not a .npy file");
  auto replace = [](std::vector<char>& b, const std::string& from, const std::string& to) {
    std::string s(b.begin(), b.end());
    const size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    REQUIRE(from.size() == to.size());
    std::copy(to.begin(), to.end(), b.begin() + static_cast<std::ptrdiff_t>(at));
  };
  const auto dict = variant("dict.npy", [&](auto& b) { replace(b, "'shape'", "'shope'"); });
  expect_error([&] { read_npy(dict); }, ErrorKind::BadInput, dict, "bad .npy header");
  const auto dict2 = variant("dict2.npy", [&](auto& b) { replace(b, "(2, 3)", "(2, x)"); });
  expect_error([&] { read_npy(dict2); }, ErrorKind::BadInput, dict2, "shape");
  const auto descr = variant("descr.npy", [&](auto& b) { replace(b, "'<f4'", "'<c8'"); });
  expect_error([&] { read_npy(descr); }, ErrorKind::Unsupported, descr, "'<c8' is not supported");
  const auto shortd = variant("short.npy", [](auto& b) { b.resize(b.size() - 5); });
  expect_error([&] { read_npy(shortd); }, ErrorKind::BadInput, shortd, "data is shorter than the shape");
  const auto version = variant("version.npy", [](auto& b) { b[6] = 9; });
  expect_error([&] { read_npy(version); }, ErrorKind::Unsupported, version, "version 9");
  expect_error([&] { read_npy(dir / "missing.npy"); }, ErrorKind::BadInput, dir / "missing.npy", "cannot open");
}

TEST_CASE("malformed .npz files give errors naming the file") {
  const fs::path dir = test::scratch_dir("tensorio_bad_npz");
  const std::vector<char> stored = read_bytes(data_dir() / "stored.npz");
  const auto notzip = dir / "notzip.npz";
  write_bytes(notzip, std::vector<char>(100, 'x'));
  expect_error([&] { read_npz(notzip); }, ErrorKind::BadInput, notzip, "not a zip archive");
  const auto trunc = dir / "trunc.npz";
  write_bytes(trunc, std::vector<char>(stored.begin(), stored.begin() + 200));
  expect_error([&] { read_npz(trunc); }, ErrorKind::BadInput, trunc, "truncated zip archive");
  // Flip one byte of the first member's data (stored, so the bytes are the .npy itself): CRC mismatch.
  std::vector<char> crc = stored;
  crc[30 + 5 + 130] ^= 0x01;  // local header (30) + "a.npy" + into the array data
  const auto badcrc = dir / "crc.npz";
  write_bytes(badcrc, crc);
  expect_error([&] { read_npz(badcrc); }, ErrorKind::BadInput, badcrc, "CRC-32 mismatch");
  // Compression method 12 (bzip2) in the central directory entry.
  std::vector<char> method = stored;
  std::string s(method.begin(), method.end());
  const size_t cd = s.find("PK\x01\x02");
  REQUIRE(cd != std::string::npos);
  method[cd + 10] = 12;
  const auto badmethod = dir / "method.npz";
  write_bytes(badmethod, method);
  expect_error([&] { read_npz(badmethod); }, ErrorKind::Unsupported, badmethod, "compression method 12");
  // Corrupt deflate stream.
  std::vector<char> deflate = read_bytes(data_dir() / "deflate.npz");
  for (size_t k = 70; k < 90; ++k) deflate[k] = static_cast<char>(0xFF);
  const auto baddeflate = dir / "deflate.npz";
  write_bytes(baddeflate, deflate);
  CHECK_THROWS_AS(read_npz(baddeflate), BadInputError);
  CHECK_THROWS_WITH(read_tensor_file(data_dir() / "stored.npz"), Contains("holds 2 arrays"));
}

TEST_CASE("malformed .pb files give errors naming the file") {
  const fs::path dir = test::scratch_dir("tensorio_bad_pb");
  const auto garbage = dir / "garbage.pb";
  write_bytes(garbage, std::vector<char>{'\xff', '\xff', '\xff', '\x07', 'a', 'b'});
  expect_error([&] { read_pb(garbage); }, ErrorKind::BadInput, garbage, "not an ONNX TensorProto");
  const std::vector<char> good = read_bytes(data_dir() / "input_0.pb");
  const auto trunc = dir / "trunc.pb";
  write_bytes(trunc, std::vector<char>(good.begin(), good.end() - 3));
  expect_error([&] { read_pb(trunc); }, ErrorKind::BadInput, trunc, "");
  const auto empty = dir / "empty.pb";
  write_bytes(empty, {});
  expect_error([&] { read_pb(empty); }, ErrorKind::BadInput, empty, "no data_type");
  CHECK_THROWS_AS(read_tensor_file(dir / "x.txt"), UsageError);
}

TEST_CASE("randomly corrupted files either read or give a typed error, never crash") {
  const fs::path dir = test::scratch_dir("tensorio_fuzz");
  std::mt19937 rng(99);
  int errors = 0, reads = 0;
  for (const char* name :
       {"f32_2x3.npy", "f64_fortran_3x4.npy", "stored.npz", "deflate.npz", "zip64.npz", "input_0.pb"}) {
    const std::vector<char> good = read_bytes(data_dir() / name);
    const fs::path path = dir / name;
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<char> b = good;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) b[rng() % b.size()] = static_cast<char>(rng());
      if (trial % 5 == 0) b.resize(rng() % b.size());
      write_bytes(path, b);
      try {
        (void)read_tensor_file(path);
        ++reads;
      } catch (const Error&) {
        ++errors;
      }
    }
  }
  CHECK(errors > 0);
  CHECK(reads + errors == 1800);
}
