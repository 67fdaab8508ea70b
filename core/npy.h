#pragma once
// Minimal .npy (format version 1.0) writer for dumps that numpy / PyTorch load directly.
#include <cstdint>
#include <string>
#include <vector>

namespace moe {

void write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape);
void write_npy(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape);

}  // namespace moe
