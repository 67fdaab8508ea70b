#include "core/router_shape.h"

#include "core/error.h"

namespace moe {

bool check_router_shape(const RouterConfig& cfg, int64_t E, int64_t K) {
  const bool softmax = cfg.score == RouterScore::kSoftmax;
  MOE_CHECK(E > 0 && K > 0 && K <= E, "router needs 0 < K <= E, got K=" << K << " E=" << E);
  MOE_CHECK(!cfg.softmax_after_topk || softmax, "softmax_after_topk needs softmax scores");
  if (cfg.groups > 1) {
    MOE_CHECK(E % cfg.groups == 0, "E=" << E << " not divisible by groups=" << cfg.groups);
    MOE_CHECK(cfg.group_topk >= 1 && cfg.group_topk <= cfg.groups,
              "group_topk=" << cfg.group_topk << " outside [1, groups=" << cfg.groups << "]");
    MOE_CHECK(K % cfg.group_topk == 0,
              "K=" << K << " not divisible by group_topk=" << cfg.group_topk);
    const int64_t per_group = K / cfg.group_topk, group_size = E / cfg.groups;
    MOE_CHECK(per_group <= group_size,
              "K / group_topk=" << per_group << " exceeds the group size " << group_size);
  }
  return softmax;
}

}  // namespace moe
