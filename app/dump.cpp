#include "app/dump.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/report.h"
#include "core/check.h"
#include "core/error.h"
#include "core/npy.h"

namespace moe {

int64_t dump_bytes_per_rank(const Workload& w, const Mesh& mesh) {
  const int64_t T = w.tokens_per_rank, H = w.model.hidden, F = w.model.ffn, E = w.model.experts,
                K = w.model.topk, El = mesh.experts_per_rank;
  const int64_t S = w.model.shared_experts, Fs = w.model.shared_ffn_used();
  const int64_t floats =
      4 * T * H + 2 * T * K + 2 * H * E + E + 2 * 3 * El * H * F + 2 * 3 * S * H * Fs;
  return 4 * floats;
}

void check_dump_target(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    // Created at the dump, under its nearest existing ancestor: refused now, before the run,
    // where that cannot be.
    fs::path up = fs::absolute(dir, ec).parent_path();
    while (!up.empty() && !fs::exists(up, ec) && up != up.parent_path()) up = up.parent_path();
    MOE_USER_CHECK(fs::is_directory(up, ec), "--dump " << dir << ": " << up.string()
                                                       << " is a file, so the directory cannot "
                                                          "be created under it; choose another");
    check_can_write_in(up.string(), "--dump " + dir);
    return;
  }
  MOE_USER_CHECK(fs::is_directory(dir, ec),
                 "--dump " << dir << " is an existing file; give a new or empty directory");
  std::string first;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    first = entry.path().filename().string();
    break;
  }
  MOE_USER_CHECK(first.empty(), "--dump " << dir << " is not empty (it holds " << first
                                          << " among others); another run's rank folders would "
                                             "mix with this one's: remove it or choose a new "
                                             "directory");
}

void write_dump(const std::string& dir, const Workload& w, const Mesh& mesh, const StepOutputs& o) {
  const int64_t T = w.tokens_per_rank, H = w.model.hidden, F = w.model.ffn, E = w.model.experts,
                K = w.model.topk, El = mesh.experts_per_rank;
  const std::string d = dir + "/rank" + std::to_string(mesh.rank);
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
  MOE_USER_CHECK(!ec, "--dump " << dir << ": cannot create " << d << " (" << ec.message()
                                << "); choose a writable directory");

  write_npy(d + "/x.npy", o.x.data(), {T, H});
  write_npy(d + "/dout.npy", o.dout.data(), {T, H});
  write_npy(d + "/w_gate.npy", o.w_gate.data(), {H, E});
  if (w.router.expert_bias) write_npy(d + "/expert_bias.npy", o.expert_bias.data(), {E});
  write_npy(d + "/w_in.npy", o.w_in.data(), {El, H, 2 * F});
  write_npy(d + "/w_out.npy", o.w_out.data(), {El, F, H});
  write_npy(d + "/idx.npy", o.idx.data(), {T, K});
  write_npy(d + "/p.npy", o.p.data(), {T, K});
  write_npy(d + "/out.npy", o.out.data(), {T, H});
  write_npy(d + "/dx.npy", o.dx.data(), {T, H});
  write_npy(d + "/dw_gate.npy", o.dw_gate.data(), {H, E});
  write_npy(d + "/dw_in.npy", o.dw_in.data(), {El, H, 2 * F});
  write_npy(d + "/dw_out.npy", o.dw_out.data(), {El, F, H});
  const int64_t S = w.model.shared_experts, Fs = w.model.shared_ffn;
  if (S > 0) {  // every rank's full copy, as used, and the full gradients after their sum
    write_npy(d + "/w_sh_in.npy", o.w_sh_in.data(), {S, H, 2 * Fs});
    write_npy(d + "/w_sh_out.npy", o.w_sh_out.data(), {S, Fs, H});
    write_npy(d + "/dw_sh_in.npy", o.dw_sh_in.data(), {S, H, 2 * Fs});
    write_npy(d + "/dw_sh_out.npy", o.dw_sh_out.data(), {S, Fs, H});
  }

  const nlohmann::json cfg = workload_to_json(w);
  nlohmann::json meta = {{"rank", mesh.rank},
                         {"world", mesh.world},
                         {"ep", mesh.ep},
                         {"fsdp", mesh.fsdp},
                         {"ep_rank", mesh.ep_rank},
                         {"fsdp_rank", mesh.fsdp_rank},
                         {"experts_begin", mesh.experts_begin},
                         {"experts_end", mesh.experts_end},
                         {"experts", o.experts},
                         {"T", T},
                         {"H", H},
                         {"F", F},
                         {"E", E},
                         {"K", K},
                         {"shared_experts", S},
                         {"shared_ffn", w.model.shared_ffn_used()},
                         {"dtype", dtype_name(w.dtype)},
                         {"expert_grad_dtype", dtype_name(w.expert_grad_dtype)},
                         {"router", cfg.at("router")},
                         {"routing", cfg.at("routing")},
                         {"capacity_factor", cfg.at("capacity_factor")},
                         {"align", w.align},
                         {"loss", o.loss},
                         {"aux", o.aux},
                         {"z", o.z}};
  // The check's tolerances (core/check.h), so that the dump verifiers use the same ones.
  for (const char* t : {"out", "dx", "p", "aux", "z", "dw_gate", "dw_in", "dw_out"})
    meta["tolerances"][t] = tolerance_for(t, w.dtype);
  if (S > 0)
    for (const char* t : {"dw_sh_in", "dw_sh_out"})
      meta["tolerances"][t] = tolerance_for(t, w.dtype);
  write_json_atomically(d + "/meta.json", meta);
}

}  // namespace moe
