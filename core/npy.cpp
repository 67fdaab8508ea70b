#include "core/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/error.h"

namespace moe {
namespace {

// The .npy format stores '<' (little-endian) data; we write the host's bytes as they are, so the
// host must be little-endian (true for every target moebench builds for: x86-64, aarch64).
bool host_is_little_endian() {
  const uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// numpy's tuple repr of the shape: "()", "(5,)", "(2, 3)".
std::string shape_repr(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) os << ", ";
    os << shape[i];
  }
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

// Format version 1.0: magic "\x93NUMPY", version bytes 1 0, uint16 little-endian header length,
// then the header dict in ASCII, padded with spaces and ended by '\n' so that the data starts at a
// multiple of 64 bytes (numpy pads to 64 since 1.14 so that the data can be memory-mapped aligned).
std::string npy_header(const char* descr, const std::vector<int64_t>& shape) {
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  const size_t prefix = 10;                 // magic (6) + version (2) + header length (2)
  size_t total = prefix + dict.size() + 1;  // + '\n'
  const size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict.push_back('\n');
  const size_t hlen = dict.size();
  MOE_CHECK(hlen <= 65535, "npy header of " << hlen << " bytes does not fit format 1.0");
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(hlen & 0xff));
  out.push_back(static_cast<char>((hlen >> 8) & 0xff));
  out += dict;
  return out;
}

void write_npy_bytes(const std::string& path, const char* descr, const void* data, size_t elem_size,
                     const std::vector<int64_t>& shape) {
  MOE_CHECK(host_is_little_endian(),
            "write_npy(" << path << "): big-endian hosts are not supported");
  size_t count = 1;  // shape () is a scalar: one element
  for (int64_t d : shape) {
    MOE_CHECK(d >= 0, "write_npy(" << path << "): negative dimension " << d << " in shape "
                                   << shape_repr(shape));
    count *= static_cast<size_t>(d);
  }
  MOE_CHECK(count == 0 || data != nullptr,
            "write_npy(" << path << "): null data for shape " << shape_repr(shape));
  const std::string header = npy_header(descr, shape);

  std::FILE* f = std::fopen(path.c_str(), "wb");
  MOE_CHECK(f != nullptr, "cannot open " << path << " for writing: " << std::strerror(errno));
  const size_t bytes = count * elem_size;
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  if (ok && bytes > 0) ok = std::fwrite(data, 1, bytes, f) == bytes;
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;  // flushes: a full disk may only show here
  MOE_CHECK(ok, "cannot write " << bytes + header.size() << " bytes to " << path << ": "
                                << std::strerror(write_errno));
  MOE_CHECK(closed, "cannot close " << path << " after writing: " << std::strerror(errno));
}

}  // namespace

void write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  static_assert(sizeof(float) == 4, "float must be IEEE binary32");
  write_npy_bytes(path, "<f4", data, sizeof(float), shape);
}

void write_npy(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape) {
  write_npy_bytes(path, "<i4", data, sizeof(int32_t), shape);
}

}  // namespace moe
