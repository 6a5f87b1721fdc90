// NumPy .npz: a zip archive of .npy members. The zip structures (PKWARE APPNOTE 6.3) are parsed here;
// zlib does raw inflate/deflate and CRC-32.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/file_io.h"
#include "tensorio/tensorio.h"

namespace qtool::tensorio {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEocdSig = 0x06054b50;
constexpr uint32_t kEocd64Sig = 0x06064b50, kEocd64LocatorSig = 0x07064b50;
constexpr uint32_t k32Max = 0xFFFFFFFFu;

class Reader {
 public:
  Reader(std::span<const std::byte> b, const std::string& what) : b_(b), what_(what) {}
  uint64_t u(size_t off, int n) const {
    if (off + static_cast<size_t>(n) > b_.size() || off + static_cast<size_t>(n) < off)
      throw BadInputError(what_ + ": truncated zip archive (a record runs past the end of the file)");
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | std::to_integer<uint64_t>(b_[off + static_cast<size_t>(i)]);
    return v;
  }
  std::span<const std::byte> sub(uint64_t off, uint64_t len) const {
    if (off > b_.size() || len > b_.size() - off)
      throw BadInputError(what_ + ": truncated zip archive (member data runs past the end of the file)");
    return b_.subspan(static_cast<size_t>(off), static_cast<size_t>(len));
  }

 private:
  std::span<const std::byte> b_;
  const std::string& what_;
};

std::vector<std::byte> inflate_raw(std::span<const std::byte> in, uint64_t out_size, const std::string& what) {
  // out_size was checked against deflate's bound and --max-tensor-bytes (list_members).
  std::vector<std::byte> out(static_cast<size_t>(out_size));
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) throw InternalError("zlib inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&zs, Z_FINISH);
  const uint64_t produced = zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || produced != out_size)
    throw BadInputError(what + ": corrupt deflate data (" +
                        (zs.msg ? std::string(zs.msg) : "zlib error " + std::to_string(rc)) + ")");
  return out;
}

uint32_t crc_of(std::span<const std::byte> data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t off = 0;
  while (off < data.size()) {  // zlib takes uInt lengths
    const size_t n = std::min<size_t>(data.size() - off, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + off), static_cast<uInt>(n));
    off += n;
  }
  return static_cast<uint32_t>(crc);
}

void put(std::vector<std::byte>& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(std::byte{static_cast<uint8_t>(v >> (8 * i))});
}

}  // namespace

namespace {

// One member as the central directory describes it; data_off is where its (compressed) bytes start.
struct Member {
  std::string name, what;  // what: "file.npz:name" for errors
  uint64_t method = 0, crc = 0, csize = 0, usize = 0, local = 0, data_off = 0;
};

// The archive's members, validated before anything is inflated: sizes within --max-tensor-bytes, deflate
// claims within deflate's 1032:1 bound, and no two members sharing bytes (a zip bomb reuses one compressed
// stream for many members, so every member is small and their sum is not).
std::vector<Member> list_members(const Reader& r, size_t file_size, const std::string& what) {
  if (file_size < 22 || r.u(0, 4) != kLocalSig)
    throw BadInputError(what + ": not a zip archive (an .npz file is a zip of .npy files)");
  // End of central directory: the last record with its signature, followed by at most 65535 comment bytes.
  size_t eocd = std::string::npos;
  const size_t lowest = file_size > 22 + 65535 ? file_size - 22 - 65535 : 0;
  for (size_t off = file_size - 22 + 1; off-- > lowest;)
    if (r.u(off, 4) == kEocdSig) {
      eocd = off;
      break;
    }
  if (eocd == std::string::npos)
    throw BadInputError(what + ": truncated zip archive (no end-of-central-directory record)");
  uint64_t count = r.u(eocd + 10, 2), cd_size = r.u(eocd + 12, 4), cd_off = r.u(eocd + 16, 4);
  if (eocd >= 20 && r.u(eocd - 20, 4) == kEocd64LocatorSig) {  // zip64: its record holds the 64-bit values
    const uint64_t rec = r.u(eocd - 20 + 8, 8);
    if (r.u(rec, 4) != kEocd64Sig) throw BadInputError(what + ": corrupt zip64 end-of-central-directory record");
    count = r.u(rec + 32, 8);
    cd_size = r.u(rec + 40, 8);
    cd_off = r.u(rec + 48, 8);
  }
  (void)r.sub(cd_off, cd_size);
  if (count > cd_size / 46)  // a central directory entry takes at least 46 bytes
    throw BadInputError(what + ": corrupt zip central directory (" + std::to_string(count) + " entries in " +
                        std::to_string(cd_size) + " bytes)");
  std::vector<Member> members;
  uint64_t p = cd_off;
  for (uint64_t e = 0; e < count; ++e) {
    if (r.u(p, 4) != kCentralSig) throw BadInputError(what + ": corrupt zip central directory");
    Member m;
    const uint64_t flags = r.u(p + 8, 2);
    m.method = r.u(p + 10, 2);
    m.crc = r.u(p + 16, 4);
    m.csize = r.u(p + 20, 4);
    m.usize = r.u(p + 24, 4);
    const uint64_t name_len = r.u(p + 28, 2), extra_len = r.u(p + 30, 2), comment_len = r.u(p + 32, 2);
    m.local = r.u(p + 42, 4);
    const auto name_bytes = r.sub(p + 46, name_len);
    m.name.assign(reinterpret_cast<const char*>(name_bytes.data()), name_bytes.size());
    // zip64 extended information: the fields that are 0xFFFFFFFF above, in this order.
    for (uint64_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const uint64_t id = r.u(x, 2), len = r.u(x + 2, 2);
      if (id == 0x0001) {
        uint64_t f = x + 4;
        if (m.usize == k32Max) m.usize = r.u(f, 8), f += 8;
        if (m.csize == k32Max) m.csize = r.u(f, 8), f += 8;
        if (m.local == k32Max) m.local = r.u(f, 8), f += 8;
      }
      x += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;
    m.what = what + ":" + m.name;
    if (flags & 1u) throw UnsupportedError(m.what + ": encrypted zip members are not supported");
    if (m.method != 0 && m.method != 8)
      throw UnsupportedError(m.what + ": zip compression method " + std::to_string(m.method) +
                             " is not supported (only stored and deflate)");
    if (r.u(m.local, 4) != kLocalSig) throw BadInputError(m.what + ": corrupt zip local header");
    m.data_off = m.local + 30 + r.u(m.local + 26, 2) + r.u(m.local + 28, 2);
    (void)r.sub(m.data_off, m.csize);
    if (m.method == 0 && m.csize != m.usize) throw BadInputError(m.what + ": stored member sizes disagree");
    // Deflate expands at most 1032:1; a larger claim is a corrupt header (and would be a huge allocation).
    if (m.method == 8 && m.usize / 1032 > m.csize + 1)
      throw BadInputError(m.what + ": corrupt zip header (claims " + std::to_string(m.usize) + " bytes from " +
                          std::to_string(m.csize) + " compressed)");
    if (m.usize > static_cast<uint64_t>(fileio::max_tensor_bytes()))
      fileio::throw_over_limit("member " + m.what, m.usize);
    members.push_back(std::move(m));
  }
  std::vector<const Member*> by_start;
  for (const Member& m : members) by_start.push_back(&m);
  std::sort(by_start.begin(), by_start.end(), [](const Member* a, const Member* b) { return a->local < b->local; });
  for (size_t i = 1; i < by_start.size(); ++i) {
    const Member& prev = *by_start[i - 1];
    if (by_start[i]->local < prev.data_off + prev.csize)
      throw BadInputError(what + ": zip members '" + prev.name + "' and '" + by_start[i]->name +
                          "' overlap (they share compressed bytes: a zip bomb or a corrupt archive)");
  }
  return members;
}

// The bytes inflated for `members` together stay within --max-tensor-bytes.
void check_total(const std::vector<Member>& members, const std::string& what) {
  uint64_t total = 0;
  for (const Member& m : members) total += m.usize;  // each <= the limit, so no overflow
  if (total > static_cast<uint64_t>(fileio::max_tensor_bytes()))
    fileio::throw_over_limit(what + " (" + std::to_string(members.size()) + " members, uncompressed)", total);
}

Tensor read_member(const Reader& r, const Member& m) {
  const auto raw = r.sub(m.data_off, m.csize);
  std::vector<std::byte> data;
  if (m.method == 0)
    data.assign(raw.begin(), raw.end());
  else
    data = inflate_raw(raw, m.usize, m.what);
  if (crc_of(data) != m.crc) throw BadInputError(m.what + ": CRC-32 mismatch; the archive is corrupt");
  return parse_npy(data, m.what);
}

std::string key_of(const std::string& name) {
  std::string key = name;
  if (key.size() > 4 && key.ends_with(".npy")) key.resize(key.size() - 4);
  return key;
}

}  // namespace

std::map<std::string, Tensor> read_npz(const std::filesystem::path& path) {
  const std::string what = path.string();
  const std::vector<std::byte> bytes = fileio::read_file_bytes(path, "tensor file");
  const Reader r(bytes, what);
  const std::vector<Member> members = list_members(r, bytes.size(), what);
  check_total(members, what);
  std::map<std::string, Tensor> out;
  for (const Member& m : members) out[key_of(m.name)] = read_member(r, m);
  return out;
}

Tensor read_npz_single(const std::filesystem::path& path) {
  const std::string what = path.string();
  const std::vector<std::byte> bytes = fileio::read_file_bytes(path, "tensor file");
  const Reader r(bytes, what);
  const std::vector<Member> members = list_members(r, bytes.size(), what);
  if (members.size() != 1)
    throw BadInputError(what + ": holds " + std::to_string(members.size()) +
                        " arrays; a single-tensor input needs exactly one (or name the member)");
  return read_member(r, members[0]);
}

void write_npz(const std::filesystem::path& path, const std::map<std::string, Tensor>& tensors, bool compress) {
  std::vector<std::byte> out, central;
  uint64_t entries = 0;
  for (const auto& [key, t] : tensors) {
    const std::string name = key + ".npy";
    std::vector<std::byte> npy;
    try {
      npy = encode_npy(t);
    } catch (const UnsupportedError& e) {
      throw UnsupportedError(path.string() + ":" + name + ": " + e.what());
    }
    const uint32_t crc = crc_of(npy);
    const uint64_t real_usize = npy.size();
    std::vector<std::byte> body;
    uint16_t method = 0;
    if (compress) {
      z_stream zs{};
      if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw InternalError("zlib deflateInit2 failed");
      body.resize(deflateBound(&zs, npy.size()));
      zs.next_in = reinterpret_cast<Bytef*>(npy.data());
      zs.avail_in = static_cast<uInt>(npy.size());
      zs.next_out = reinterpret_cast<Bytef*>(body.data());
      zs.avail_out = static_cast<uInt>(body.size());
      const int rc = deflate(&zs, Z_FINISH);
      body.resize(zs.total_out);
      deflateEnd(&zs);
      if (rc != Z_STREAM_END) throw InternalError("zlib deflate failed");
      method = 8;
    } else {
      body = std::move(npy);
    }
    const uint64_t offset = out.size();
    const bool z64 = body.size() >= k32Max || real_usize >= k32Max || offset >= k32Max;
    auto header_common = [&](std::vector<std::byte>& h) {
      put(h, z64 ? 45 : 20, 2);  // version needed
      put(h, 0, 2);              // flags
      put(h, method, 2);
      put(h, 0, 2);     // time
      put(h, 0x21, 2);  // date: 1980-01-01
      put(h, crc, 4);
      put(h, z64 ? k32Max : body.size(), 4);
      put(h, z64 ? k32Max : real_usize, 4);
      put(h, name.size(), 2);
    };
    // local header
    put(out, kLocalSig, 4);
    header_common(out);
    put(out, z64 ? 20 : 0, 2);
    out.insert(out.end(), reinterpret_cast<const std::byte*>(name.data()),
               reinterpret_cast<const std::byte*>(name.data()) + name.size());
    if (z64) {
      put(out, 0x0001, 2);
      put(out, 16, 2);
      put(out, real_usize, 8);
      put(out, body.size(), 8);
    }
    out.insert(out.end(), body.begin(), body.end());
    // central directory entry
    put(central, kCentralSig, 4);
    put(central, z64 ? 45 : 20, 2);  // version made by
    header_common(central);
    put(central, z64 ? 28 : 0, 2);  // extra length
    put(central, 0, 2);             // comment length
    put(central, 0, 2);             // disk
    put(central, 0, 2);             // internal attributes
    put(central, 0, 4);             // external attributes
    put(central, z64 ? k32Max : offset, 4);
    central.insert(central.end(), reinterpret_cast<const std::byte*>(name.data()),
                   reinterpret_cast<const std::byte*>(name.data()) + name.size());
    if (z64) {
      put(central, 0x0001, 2);
      put(central, 24, 2);
      put(central, real_usize, 8);
      put(central, body.size(), 8);
      put(central, offset, 8);
    }
    ++entries;
  }
  const uint64_t cd_off = out.size(), cd_size = central.size();
  out.insert(out.end(), central.begin(), central.end());
  const bool z64 = cd_off >= k32Max || entries >= 0xFFFF;
  if (z64) {
    const uint64_t rec = out.size();
    put(out, kEocd64Sig, 4);
    put(out, 44, 8);
    put(out, 45, 2);
    put(out, 45, 2);
    put(out, 0, 4);
    put(out, 0, 4);
    put(out, entries, 8);
    put(out, entries, 8);
    put(out, cd_size, 8);
    put(out, cd_off, 8);
    put(out, kEocd64LocatorSig, 4);
    put(out, 0, 4);
    put(out, rec, 8);
    put(out, 1, 4);
  }
  put(out, kEocdSig, 4);
  put(out, 0, 2);
  put(out, 0, 2);
  put(out, z64 ? 0xFFFF : entries, 2);
  put(out, z64 ? 0xFFFF : entries, 2);
  put(out, z64 ? k32Max : cd_size, 4);
  put(out, z64 ? k32Max : cd_off, 4);
  put(out, 0, 2);
  fileio::write_file_atomic(path, out);
}

}  // namespace qtool::tensorio
