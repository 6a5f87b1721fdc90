// Safe file access; the contract is at the top of file_io.h.
#include "core/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "core/limits.h"

namespace qtool::fileio {
namespace fs = std::filesystem;
namespace {

// Built with append: GCC 12 warns falsely (-Wrestrict, bug 105329) on "literal" + std::string&&.
std::string quoted(const fs::path& p) {
  std::string s(1, '\'');
  s.append(p.string()).push_back('\'');
  return s;
}

std::string errno_text(int err) { return std::strerror(err); }

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

std::atomic<int64_t> g_max_tensor_bytes{kDefaultMaxTensorBytes};

// ---- Inputs of this process, by device and inode.
struct InputRecord {
  std::string path, role;
};
std::mutex g_inputs_mutex;
std::map<std::pair<dev_t, ino_t>, InputRecord> g_inputs;

std::atomic<bool> g_remember_inputs{false};

void note_input(const struct stat& st, const fs::path& path, std::string_view role) {
  const std::lock_guard lock(g_inputs_mutex);
  g_inputs.try_emplace({st.st_dev, st.st_ino}, InputRecord{path.string(), std::string(role)});
}

// ---- Live temporary files, for the signal handler. A slot is claimed (Free -> Filling), its path copied, then
// published (Live); the handler reads only Live slots. Lock-free atomics are async-signal-safe.
enum SlotState : int { kFree = 0, kFilling = 1, kLive = 2 };
struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};
static_assert(std::atomic<int>::is_always_lock_free);
constexpr int kSlots = 64;
Slot g_slots[kSlots];

int claim_slot(const fs::path& temp) {
  const std::string& s = temp.native();
  if (s.size() >= PATH_MAX) throw BadInputError("cannot write " + quoted(temp) + ": the path is too long");
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (g_slots[i].state.compare_exchange_strong(expected, kFilling)) {
      std::memcpy(g_slots[i].path, s.c_str(), s.size() + 1);
      g_slots[i].state.store(kLive, std::memory_order_release);
      return i;
    }
  }
  throw InternalError("more than " + std::to_string(kSlots) + " temporary files are open at once");
}

void release_slot(int i) { g_slots[i].state.store(kFree, std::memory_order_release); }

// Async-signal-safe: atomics and unlink only.
void unlink_live_temporaries() {
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == kLive) ::unlink(s.path);
}

extern "C" void remove_temporaries_and_reraise(int sig) {
  const int saved = errno;
  unlink_live_temporaries();
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);  // pending until this handler returns (sig is blocked in it), then the default action
  errno = saved;
}

constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXFSZ};

// ---- Live file mappings (InputFile::map_private), for the SIGBUS handler. Touching a mapped page past the file's
// end (another program truncated the file after it was mapped) or one the disk cannot read raises SIGBUS; the
// handler finds the mapping that holds the faulting address and exits 2 with the error line written when the
// mapping was made, instead of dying of the signal. A slot is claimed as the temporary-file slots are; its
// message is owned by the slot from claim to release (the handler reads it only while the slot is Live, and a
// fault inside a mapping means the mapping, so its slot, is still live).
struct MapSlot {
  std::atomic<int> state{kFree};
  uintptr_t begin = 0, end = 0;
  char* message = nullptr;  // "error: ...\n", new[]
  size_t length = 0;
};
constexpr int kMapSlots = 4096;
MapSlot g_maps[kMapSlots];

int claim_map_slot(const void* begin, size_t length, const std::string& message) {
  auto text = std::make_unique<char[]>(message.size());  // before a slot is claimed: a throw leaves none Filling
  std::memcpy(text.get(), message.data(), message.size());
  for (int i = 0; i < kMapSlots; ++i) {
    int expected = kFree;
    if (g_maps[i].state.compare_exchange_strong(expected, kFilling)) {
      MapSlot& m = g_maps[i];
      m.begin = reinterpret_cast<uintptr_t>(begin);
      m.end = m.begin + length;
      m.message = text.release();
      m.length = message.size();
      m.state.store(kLive, std::memory_order_release);
      return i;
    }
  }
  return -1;  // every slot in use: the caller reads instead of mapping
}

void release_map_slot(int i) {
  char* message = g_maps[i].message;
  g_maps[i].state.store(kFree, std::memory_order_release);
  delete[] message;
}

extern "C" void report_mapping_fault(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  if (info->si_code > 0) {  // a fault, not kill/raise: si_addr is the faulting address
    for (const MapSlot& m : g_maps) {
      if (m.state.load(std::memory_order_acquire) != kLive || addr < m.begin || addr >= m.end) continue;
      unlink_live_temporaries();
      for (size_t done = 0; done < m.length;) {
        const ssize_t w = ::write(STDERR_FILENO, m.message + done, m.length - done);
        if (w <= 0 && errno != EINTR) break;
        if (w > 0) done += static_cast<size_t>(w);
      }
      ::_exit(kExitBadInput);
    }
  }
  remove_temporaries_and_reraise(sig);  // not a mapped file: the crash it is, without temporaries left behind
}

std::string random_suffix() {
  uint64_t r = 0;
  if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) {
    static std::atomic<uint64_t> counter{0};
    r = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (static_cast<uint64_t>(::getpid()) << 32) ^ (++counter * 0x9E3779B97F4A7C15ull);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(r));
  return buf;
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

int64_t max_tensor_bytes() { return g_max_tensor_bytes.load(std::memory_order_relaxed); }

void remember_inputs(bool on) { g_remember_inputs.store(on, std::memory_order_relaxed); }

void set_max_tensor_bytes(int64_t bytes) {
  if (bytes <= 0) throw UsageError("--max-tensor-bytes must be positive");
  g_max_tensor_bytes.store(bytes, std::memory_order_relaxed);
}

void throw_over_limit(const std::string& what, uint64_t bytes) {
  const auto limit = static_cast<uint64_t>(max_tensor_bytes());
  throw BadInputError(what + " needs " + std::to_string(bytes) + " bytes (" +
                      format_bytes(static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX))) + "), over the limit of " +
                      format_bytes(static_cast<int64_t>(limit)) +
                      " for one tensor or file; raise --max-tensor-bytes if the file is trusted");
}

// ---------------------------------------------------------------------------------------------------
// Reading

InputFile::InputFile(const fs::path& path, std::string_view role) : path_(path), role_(role) {
  const std::string name = role_ + " " + quoted(path_);
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    if (err == ENOENT) throw BadInputError("cannot open " + name + ": no such file; check the path");
    throw BadInputError("cannot open " + name + ": " + errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(std::exchange(fd_, -1));
    throw BadInputError("cannot open " + name + ": " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(std::exchange(fd_, -1));
    throw BadInputError("cannot open " + name + ": it is " + kind_of(st.st_mode) + ", not a regular file");
  }
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  size_ = static_cast<int64_t>(st.st_size);
  if (g_remember_inputs.load(std::memory_order_relaxed)) note_input(st, path_, role_);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int InputFile::release() { return std::exchange(fd_, -1); }

void InputFile::read_at(int64_t offset, void* buf, size_t n) const {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(fd_, p, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw BadInputError("cannot read " + role_ + " " + quoted(path_) + ": " + errno_text(errno));
    if (r == 0)
      throw BadInputError("cannot read " + role_ + " " + quoted(path_) + ": it ends at byte " +
                          std::to_string(offset) + ", before the data it should hold (was it truncated?)");
    p += r;
    offset += r;
    n -= static_cast<size_t>(r);
  }
}

std::shared_ptr<std::byte[]> InputFile::map_private(int64_t offset, size_t n) const {
  if (offset < 0 || static_cast<uint64_t>(offset) + n > static_cast<uint64_t>(size_))
    throw BadInputError("cannot read " + role_ + " " + quoted(path_) + ": it ends at byte " + std::to_string(size_) +
                        ", before the data it should hold (was it truncated?)");
  if (n == 0) return nullptr;
  const auto page = static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
  const int64_t start = offset / page * page;
  const size_t length = n + static_cast<size_t>(offset - start);
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd_, static_cast<off_t>(start));
  if (base == MAP_FAILED) return nullptr;
  const int slot = claim_map_slot(base, length,
                                  "error: cannot read " + role_ + " " + quoted(path_) +
                                      ": the file shrank or could not be read while qtool was using it (did another "
                                      "program truncate or rewrite it?); run again once nothing else writes it\n");
  if (slot < 0) {
    ::munmap(base, length);
    return nullptr;
  }
  auto* data = static_cast<std::byte*>(base) + (offset - start);
  return std::shared_ptr<std::byte[]>(data, [base, length, slot](std::byte*) {
    release_map_slot(slot);
    ::munmap(base, length);
  });
}

std::string InputFile::read_all(int64_t max_bytes) const {
  if (size_ > max_bytes) throw_over_limit(role_ + " " + quoted(path_), static_cast<uint64_t>(size_));
  std::string out(static_cast<size_t>(size_), '\0');
  read_at(0, out.data(), out.size());
  return out;
}

std::string read_file(const fs::path& path, std::string_view role, int64_t max_bytes) {
  return InputFile(path, role).read_all(max_bytes);
}

std::vector<std::byte> read_file_bytes(const fs::path& path, std::string_view role, int64_t max_bytes) {
  const InputFile f(path, role);
  if (f.size() > max_bytes) throw_over_limit(std::string(role) + " " + quoted(path), static_cast<uint64_t>(f.size()));
  std::vector<std::byte> out(static_cast<size_t>(f.size()));
  f.read_at(0, out.data(), out.size());
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Inputs and outputs

void protect_input(const fs::path& path, std::string_view role) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return;
  if (S_ISREG(st.st_mode)) return note_input(st, path, role);
  if (!S_ISDIR(st.st_mode)) return;
  std::error_code ec;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
  for (int64_t seen = 0; !ec && it != end && seen < 1'000'000; it.increment(ec), ++seen) {
    if (it.depth() >= 2) it.disable_recursion_pending();
    struct stat f {};
    if (::stat(it->path().c_str(), &f) == 0 && S_ISREG(f.st_mode)) note_input(f, it->path(), role);
  }
}

void check_output_target(const fs::path& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0) return;  // a new path (or a dangling symlink, which the rename replaces)
  if (!S_ISREG(st.st_mode))
    throw BadInputError("refusing to write " + quoted(target) + ": it is " + kind_of(st.st_mode) +
                        ", not a regular file; give a new path or a regular file with -o");
  const std::lock_guard lock(g_inputs_mutex);
  auto it = g_inputs.find({st.st_dev, st.st_ino});
  if (it != g_inputs.end())
    throw BadInputError("refusing to overwrite " + quoted(target) + ": it is the input " + it->second.role + " " +
                        quoted(fs::path(it->second.path)) + "; choose another output path");
}

// ---------------------------------------------------------------------------------------------------
// Writing

AtomicFile::AtomicFile(const fs::path& target) : target_(target) {
  if (target.filename().empty() || target.filename() == "." || target.filename() == "..")
    throw BadInputError("cannot write " + quoted(target) + ": not a file name");
  check_output_target(target);
  std::string base = target.filename().string();
  if (base.size() > 200) base.resize(200);  // room for the suffix within NAME_MAX
  for (int attempt = 0; attempt < 64; ++attempt) {
    const fs::path temp = target.parent_path() / ("." + base + ".tmp-" + random_suffix());
    // Registered before it exists: there is no moment where the file exists and the handler does not know it.
    slot_ = claim_slot(temp);
    fd_ = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ >= 0) {
      temp_ = temp;
      return;
    }
    const int err = errno;
    release_slot(std::exchange(slot_, -1));
    if (err != EEXIST)
      throw BadInputError("cannot write " + quoted(target) + ": cannot create a temporary file beside it (" +
                          errno_text(err) + ")");
  }
  throw BadInputError("cannot write " + quoted(target) + ": no free temporary name beside it");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (slot_ >= 0) {
    ::unlink(temp_.c_str());
    release_slot(slot_);
  }
}

void AtomicFile::fail(const std::string& why) { throw BadInputError("cannot write " + quoted(target_) + ": " + why); }

void AtomicFile::write(const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(w < 0 ? errno_text(errno) : "the write made no progress");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::finish() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  if (::close(fd) != 0 || !synced) fail(errno_text(synced ? errno : err));
}

void AtomicFile::commit() {
  if (slot_ < 0) throw InternalError("AtomicFile::commit called twice for " + quoted(target_));
  finish();
  check_output_target(target_);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail(errno_text(errno));
  release_slot(std::exchange(slot_, -1));
  fsync_dir(target_.parent_path().empty() ? fs::path(".") : target_.parent_path());
}

void write_file_atomic(const fs::path& target, std::span<const std::byte> bytes) {
  AtomicFile f(target);
  f.write(bytes.data(), bytes.size());
  f.commit();
}

void write_file_atomic(const fs::path& target, std::string_view bytes) {
  write_file_atomic(target, std::as_bytes(std::span(bytes.data(), bytes.size())));
}

void install_cleanup_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = remove_temporaries_and_reraise;
  sigemptyset(&sa.sa_mask);
  for (int sig : kCleanupSignals) sigaddset(&sa.sa_mask, sig);
  sa.sa_flags = SA_RESTART;
  for (int sig : kCleanupSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // e.g. nohup
    ::sigaction(sig, &sa, nullptr);
  }
  struct sigaction bus {};
  bus.sa_sigaction = report_mapping_fault;
  sigemptyset(&bus.sa_mask);
  for (int sig : kCleanupSignals) sigaddset(&bus.sa_mask, sig);
  bus.sa_flags = SA_SIGINFO;
  ::sigaction(SIGBUS, &bus, nullptr);
}

}  // namespace qtool::fileio
