#pragma once
// The world as an fsdp x ep grid: EP groups are consecutive ranks (rank = fsdp_rank * ep +
// ep_rank), so expert-parallel traffic stays between neighbouring GPUs of one host.
#include <cstdint>

namespace moe {

struct Mesh {
  int world = 1, rank = 0;
  int ep = 1, fsdp = 1;
  int ep_rank = 0, fsdp_rank = 0;
  int64_t experts = 0, experts_per_rank = 0;   // E, E / ep
  int64_t experts_begin = 0, experts_end = 0;  // this rank's global experts [begin, end)
};

Mesh make_mesh(int world, int rank, int64_t ep, int64_t fsdp, int64_t experts);

// The most ranks that write into each other's memory (comm/peer_window.h, dispatch nvlink): the
// GPUs one NVLink switch joins in one host.
constexpr int kMaxWindowRanks = 8;

}  // namespace moe
