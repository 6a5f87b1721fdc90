// core/file_io: atomic writes leave only the finished file (errors, a full disk, signals), readers refuse
// non-regular files, and a file this process read is never written over.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>

#include "core/error.h"
#include "core/file_io.h"
#include "test_paths.h"

using namespace qtool;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Runs `body` in a child process; returns its wait status.
template <class F>
int in_child(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("an atomic write leaves the finished file, or nothing when it is abandoned") {
  const fs::path dir = test::scratch_dir("file_io_atomic");
  fileio::write_file_atomic(dir / "a.txt", std::string_view("hello"));
  CHECK(read_text(dir / "a.txt") == "hello");
  {
    fileio::AtomicFile f(dir / "b.txt");
    f.write("partial", 7);
    CHECK(fs::exists(f.temp_path()));
    CHECK(f.temp_path().parent_path() == dir);
  }  // an error path: destroyed without commit
  CHECK(listing(dir) == std::vector<std::string>{"a.txt"});
}

TEST_CASE("a temporary name planted as a symlink cannot redirect the write") {
  const fs::path dir = test::scratch_dir("file_io_planted");
  write_text(dir / "victim", "precious");
  fs::create_symlink(dir / "victim", dir / "out.json.tmp");
  fs::create_symlink(dir / "victim", dir / ".out.json.tmp");
  fileio::write_file_atomic(dir / "out.json", std::string_view("{}"));
  CHECK(read_text(dir / "victim") == "precious");
  CHECK(read_text(dir / "out.json") == "{}");
  CHECK(listing(dir) == std::vector<std::string>{".out.json.tmp", "out.json", "out.json.tmp", "victim"});
}

TEST_CASE("a full disk (file size limit) fails the write with a BadInputError and removes the temporary file") {
  const fs::path dir = test::scratch_dir("file_io_full");
  const int status = in_child([&] {
    const rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG, as with ENOSPC
    try {
      fileio::write_file_atomic(dir / "big.bin", std::string(100000, 'x'));
    } catch (const BadInputError& e) {
      ::_exit(std::string(e.what()).find("big.bin") != std::string::npos ? 0 : 2);
    }
    ::_exit(1);
  });
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(listing(dir).empty());
}

TEST_CASE("a signal during a write removes the temporary file and kills with that signal") {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGXFSZ}) {
    const fs::path dir = test::scratch_dir("file_io_signal");
    const int status = in_child([&] {
      ::signal(sig, SIG_DFL);
      fileio::install_cleanup_signal_handlers();
      fileio::AtomicFile keep(dir / "first.bin");  // two live temporaries at once
      fileio::AtomicFile f(dir / "second.bin");
      f.write("some bytes", 10);
      ::raise(sig);
      ::_exit(3);  // not reached
    });
    INFO("signal " << sig);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK(listing(dir).empty());
  }
}

TEST_CASE("a mapped input truncated by another program exits 2 naming it and leaves no temporary file") {
  const fs::path dir = test::scratch_dir("file_io_mapped_truncated");
  const size_t n = size_t{4} << 20;
  write_text(dir / "weights.bin", std::string(n, 'w'));
  const int status = in_child([&] {
    const int err = ::open((dir / "stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(err, STDERR_FILENO);
    fileio::install_cleanup_signal_handlers();
    fileio::AtomicFile out(dir / "out.onnx");
    out.write("partial", 7);
    const fileio::InputFile in(dir / "weights.bin", "external data");
    const std::shared_ptr<std::byte[]> mapped = in.map_private(0, n);
    if (!mapped) ::_exit(4);
    const volatile std::byte first = mapped[0];  // a page read before the truncation stays readable
    (void)first;
    if (::truncate((dir / "weights.bin").c_str(), 0) != 0) ::_exit(5);
    const volatile std::byte last = mapped[n - 1];  // past the new end: SIGBUS
    (void)last;
    ::_exit(3);  // not reached
  });
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  const std::string err = read_text(dir / "stderr.txt");
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK_THAT(err, Catch::StartsWith("error: cannot read external data") && Catch::Contains("weights.bin") &&
                      Catch::Contains("while qtool was using it"));
  CHECK(listing(dir) == std::vector<std::string>{"stderr.txt", "weights.bin"});
}

TEST_CASE("a SIGBUS outside any mapped input still kills with SIGBUS and removes temporary files") {
  const fs::path dir = test::scratch_dir("file_io_sigbus");
  const int status = in_child([&] {
    const rlimit no_core{0, 0};  // SIGBUS dumps core by default: not here
    ::setrlimit(RLIMIT_CORE, &no_core);
    fileio::install_cleanup_signal_handlers();
    fileio::AtomicFile f(dir / "out.bin");
    f.write("x", 1);
    ::raise(SIGBUS);
    ::_exit(3);  // not reached
  });
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGBUS);
  CHECK(listing(dir).empty());
}

TEST_CASE("readers refuse FIFOs, folders and files over the limit, naming the path") {
  const fs::path dir = test::scratch_dir("file_io_read");
  REQUIRE(::mkfifo((dir / "fifo.json").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(fileio::read_file(dir / "fifo.json", "config"),
                    Catch::Contains("fifo.json") && Catch::Contains("a FIFO, not a regular file"));
  CHECK_THROWS_WITH(fileio::read_file(dir, "config"), Catch::Contains("a directory, not a regular file"));
  CHECK_THROWS_WITH(fileio::read_file(dir / "missing", "config"), Catch::Contains("no such file"));
  write_text(dir / "t.npy", std::string(5000, 'x'));
  CHECK_THROWS_WITH(fileio::read_file(dir / "t.npy", "tensor file", 4096),
                    Catch::Contains("t.npy") && Catch::Contains("--max-tensor-bytes"));
  CHECK(fileio::read_file(dir / "t.npy", "tensor file", 5000).size() == 5000);
}

TEST_CASE("an output that is an input of this process, by any name, or not a regular file, is refused") {
  const fs::path dir = test::scratch_dir("file_io_inputs");
  write_text(dir / "in.onnx", "model bytes");
  write_text(dir / "other.onnx", "other bytes");
  (void)fileio::read_file(dir / "other.onnx", "model");  // not remembered yet: a library may rewrite what it read
  CHECK_NOTHROW(fileio::write_file_atomic(dir / "other.onnx", std::string_view("new")));
  fileio::remember_inputs(true);  // as the CLI does
  (void)fileio::read_file(dir / "in.onnx", "model");
  fs::create_hard_link(dir / "in.onnx", dir / "hard.onnx");
  fs::create_symlink(dir / "in.onnx", dir / "link.onnx");
  for (const fs::path& out : {dir / "in.onnx", dir / "." / "in.onnx", dir / ".." / dir.filename() / "in.onnx",
                              dir / "hard.onnx", dir / "link.onnx"}) {
    INFO(out);
    CHECK_THROWS_WITH(fileio::write_file_atomic(out, std::string_view("x")),
                      Catch::Contains("refusing to overwrite") && Catch::Contains("input model"));
  }
  CHECK(read_text(dir / "in.onnx") == "model bytes");
  CHECK_THROWS_WITH(fileio::write_file_atomic("/dev/null", std::string_view("x")),
                    Catch::Contains("character device"));
  struct stat st {};
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK_THROWS_WITH(fileio::write_file_atomic(dir, std::string_view("x")), Catch::Contains("directory"));
  // A declared input folder protects the files under it before they are read.
  fs::create_directories(dir / "data" / "test_data_set_0");
  write_text(dir / "data" / "test_data_set_0" / "input_0.pb", "pb");
  fileio::protect_input(dir / "data", "--data");
  CHECK_THROWS_WITH(fileio::check_output_target(dir / "data" / "test_data_set_0" / "input_0.pb"),
                    Catch::Contains("input --data"));
  CHECK_NOTHROW(fileio::check_output_target(dir / "new.json"));
  CHECK(listing(dir) == std::vector<std::string>{"data", "hard.onnx", "in.onnx", "link.onnx", "other.onnx"});
  fileio::remember_inputs(false);
}
