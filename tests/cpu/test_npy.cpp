// write_npy: the bytes on disk follow numpy's format 1.0 exactly (parsed here in C++, no numpy
// needed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npy.h"

namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / ("moe_npy_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

struct Parsed {
  int major = -1, minor = -1;
  size_t data_offset = 0;
  std::string dict;     // header text without padding and '\n'
  std::string descr;    // e.g. "<f4"
  std::string fortran;  // "False" / "True"
  std::string shape;    // tuple text, e.g. "(5,)"
  std::string data;     // raw bytes after the header
};

std::string read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in.good()) << p;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The value text after "'key': " in the dict, up to the next ',' at depth 0 or the closing '}'.
std::string dict_value(const std::string& dict, const std::string& key) {
  const std::string k = "'" + key + "': ";
  size_t pos = dict.find(k);
  if (pos == std::string::npos) return "<missing>";
  pos += k.size();
  int depth = 0;
  size_t end = pos;
  for (; end < dict.size(); ++end) {
    const char c = dict[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string v = dict.substr(pos, end - pos);
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
  return v;
}

Parsed parse(const std::string& bytes) {
  Parsed r;
  EXPECT_GE(bytes.size(), 10u);
  if (bytes.size() < 10) return r;
  EXPECT_EQ(bytes.substr(0, 6), std::string("\x93NUMPY", 6));
  r.major = static_cast<unsigned char>(bytes[6]);
  r.minor = static_cast<unsigned char>(bytes[7]);
  const size_t hlen = static_cast<unsigned char>(bytes[8]) |
                      (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  r.data_offset = 10 + hlen;
  EXPECT_LE(r.data_offset, bytes.size());
  const std::string header = bytes.substr(10, hlen);
  EXPECT_FALSE(header.empty());
  EXPECT_EQ(header.back(), '\n');
  // Everything between the closing '}' and the final '\n' is space padding.
  const size_t close = header.rfind('}');
  EXPECT_NE(close, std::string::npos);
  for (size_t i = close + 1; i + 1 < header.size(); ++i) EXPECT_EQ(header[i], ' ') << "at " << i;
  r.dict = header.substr(0, close + 1);
  EXPECT_EQ(r.dict.front(), '{');
  r.descr = dict_value(r.dict, "descr");
  r.fortran = dict_value(r.dict, "fortran_order");
  r.shape = dict_value(r.dict, "shape");
  r.data = bytes.substr(r.data_offset);
  return r;
}

template <typename T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST_F(NpyTest, Float2D) {
  const std::vector<float> v = {1.0f, -2.5f, 3.25f, 0.0f, 1e-30f, -7.0e20f};
  moe::write_npy(path("a.npy"), v.data(), {2, 3});
  const Parsed p = parse(read_all(path("a.npy")));
  EXPECT_EQ(p.major, 1);
  EXPECT_EQ(p.minor, 0);
  EXPECT_EQ(p.data_offset % 64, 0u);
  EXPECT_EQ(p.descr, "<f4");
  EXPECT_EQ(p.fortran, "False");
  EXPECT_EQ(p.shape, "(2, 3)");
  EXPECT_EQ(p.data, raw(v));  // C order: the buffer as given
}

TEST_F(NpyTest, Int32OneDimensional) {
  const std::vector<int32_t> v = {0, 1, -1, 2147483647, -2147483647 - 1};
  moe::write_npy(path("i.npy"), v.data(), {5});
  const Parsed p = parse(read_all(path("i.npy")));
  EXPECT_EQ(p.major, 1);
  EXPECT_EQ(p.data_offset % 64, 0u);
  EXPECT_EQ(p.descr, "<i4");
  EXPECT_EQ(p.fortran, "False");
  EXPECT_EQ(p.shape, "(5,)");  // numpy's 1-tuple form
  EXPECT_EQ(p.data, raw(v));
}

TEST_F(NpyTest, ScalarShape) {
  const float v = 42.5f;
  moe::write_npy(path("s.npy"), &v, {});
  const Parsed p = parse(read_all(path("s.npy")));
  EXPECT_EQ(p.shape, "()");
  EXPECT_EQ(p.data_offset % 64, 0u);
  EXPECT_EQ(p.data, raw(std::vector<float>{v}));
}

TEST_F(NpyTest, EmptyAndHighRank) {
  moe::write_npy(path("e.npy"), static_cast<const float*>(nullptr), {0, 3});
  Parsed p = parse(read_all(path("e.npy")));
  EXPECT_EQ(p.shape, "(0, 3)");
  EXPECT_TRUE(p.data.empty());

  // Long shapes push the header past one 64-byte block; the data must still be aligned.
  std::vector<int64_t> shape(12, 1);
  shape[3] = 1234567;
  std::vector<int32_t> v(1234567);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i * 7);
  moe::write_npy(path("h.npy"), v.data(), shape);
  p = parse(read_all(path("h.npy")));
  EXPECT_EQ(p.data_offset % 64, 0u);
  EXPECT_GT(p.data_offset, 64u);
  EXPECT_EQ(p.shape, "(1, 1, 1, 1234567, 1, 1, 1, 1, 1, 1, 1, 1)");
  EXPECT_EQ(p.data, raw(v));
}

TEST_F(NpyTest, OverwritesExistingFile) {
  const std::vector<float> big(100, 1.0f), small = {2.0f};
  moe::write_npy(path("o.npy"), big.data(), {100});
  moe::write_npy(path("o.npy"), small.data(), {1});
  const Parsed p = parse(read_all(path("o.npy")));
  EXPECT_EQ(p.shape, "(1,)");
  EXPECT_EQ(p.data, raw(small));
}

TEST_F(NpyTest, UnwritablePathNamesThePath) {
  const std::string bad = path("no_such_dir/x.npy");
  const float v = 1.0f;
  try {
    moe::write_npy(bad, &v, {1});
    FAIL() << "write_npy to " << bad << " did not throw";
  } catch (const moe::Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST_F(NpyTest, NegativeDimensionRejected) {
  const float v = 1.0f;
  EXPECT_THROW(moe::write_npy(path("n.npy"), &v, {2, -1}), moe::Error);
}

}  // namespace
