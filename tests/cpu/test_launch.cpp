// How ranks take GPUs under each launcher (fake counts: no GPU needed), the driver version read
// from /proc's text, and the hosts gathered for the provenance.
#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>
#include <string>

#include "app/launch.h"
#include "core/error.h"
#include "tests/common/user_error.h"

namespace moe {
namespace {

using test::user_error_of;

TEST(GpuForRank, EveryRankSeesEveryGpuOfItsHost) {
  // mpirun with 8 GPUs visible to all: local rank r takes GPU r, whether the host is full or not.
  for (int r = 0; r < 8; ++r) EXPECT_EQ(gpu_for_rank(r, 8, 8), r);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(gpu_for_rank(r, 4, 8), r);
  EXPECT_EQ(gpu_for_rank(0, 1, 1), 0);
}

TEST(GpuForRank, EachRankSeesOnlyItsOwnGpu) {
  // Slurm --gpus-per-task=1 or CUDA_VISIBLE_DEVICES per rank: 8 ranks on a host, one GPU each.
  for (int r = 0; r < 8; ++r) EXPECT_EQ(gpu_for_rank(r, 8, 1), 0);
}

TEST(GpuForRank, RanksThatWouldShareSeveralGpusAreRefused) {
  const std::string msg = user_error_of([] { gpu_for_rank(5, 8, 4); });
  EXPECT_NE(msg.find("8 ranks on this host"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 GPUs visible"), std::string::npos) << msg;
  EXPECT_NE(msg.find("one rank per GPU"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--gpus-per-task=1"), std::string::npos) << msg;
  EXPECT_NE(user_error_of([] { gpu_for_rank(0, 3, 2); }), "(no UserError)");
  EXPECT_NE(user_error_of([] { gpu_for_rank(0, 1, 0); }).find("no GPU"), std::string::npos);
}

TEST(NvidiaDriverVersion, FromProcText) {
  EXPECT_EQ(nvidia_driver_version_from(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 "
                "UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"),
            "550.54.15");
  EXPECT_EQ(nvidia_driver_version_from("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                                       "570.133.20  Release Build  (dvs-builder@U16)  Fri Mar 14"),
            "570.133.20");
  EXPECT_EQ(nvidia_driver_version_from(""), "");
  EXPECT_EQ(nvidia_driver_version_from("no version here 2024\n1.2.3"), "");
}

TEST(RankPlaces, GatheredAndDescribed) {
  RankPlace me;
  MPI_Comm_rank(MPI_COMM_WORLD, &me.rank);
  me.host = host_name();
  me.gpu = 1;
  me.pci_bus_id = "0000:45:00.0";
  me.uuid = "GPU-8e1a0c2b-0000-1111-2222-333344445555";
  me.gpu_name = "NVIDIA H200";
  const std::vector<RankPlace> all = gather_places(me, MPI_COMM_WORLD, 60);
  ASSERT_EQ(all.size(), 1u);  // the unit tests' world is one rank
  EXPECT_FALSE(all[0].host.empty());
  EXPECT_EQ(all[0].host, me.host);
  EXPECT_EQ(all[0].gpu, 1);
  EXPECT_EQ(all[0].pci_bus_id, me.pci_bus_id);
  EXPECT_EQ(all[0].uuid, me.uuid);
  EXPECT_EQ(all[0].gpu_name, me.gpu_name);
  EXPECT_EQ(all[0].describe(), "rank 0 on " + me.host + ": GPU 1 (0000:45:00.0, NVIDIA H200)");
  me.gpu = -1;
  EXPECT_EQ(gather_places(me, MPI_COMM_WORLD, 60)[0].gpu, -1);
}

TEST(RankPlaces, TwoRanksOnOneGpuAreRefused) {
  // Two ranks per host, each seeing one GPU: their own (Slurm --gpus-per-task=1) passes ...
  std::vector<RankPlace> p(4);
  const char* hosts[] = {"a", "a", "b", "b"};
  const char* uuids[] = {"GPU-1", "GPU-2", "GPU-1", "GPU-2"};  // the same UUIDs on two hosts
  for (int i = 0; i < 4; ++i) {
    p[i].rank = i;
    p[i].host = hosts[i];
    p[i].gpu = 0;
    p[i].pci_bus_id = "0000:0" + std::to_string(i) + ":00.0";
    p[i].uuid = uuids[i];
  }
  EXPECT_EQ(user_error_of([&] { check_no_shared_gpu(p); }), "(no UserError)");
  // ... the same GPU shown to both (CUDA_VISIBLE_DEVICES=0 for every rank) is refused.
  p[3].uuid = "GPU-1";
  const std::string msg = user_error_of([&] { check_no_shared_gpu(p); });
  EXPECT_NE(msg.find("ranks 2 and 3 on b both run on GPU 0000:02:00.0 (GPU-1)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("its own GPU"), std::string::npos) << msg;
  // The CPU backend has no GPUs to share.
  for (RankPlace& r : p) r.gpu = -1;
  EXPECT_EQ(user_error_of([&] { check_no_shared_gpu(p); }), "(no UserError)");
}

TEST(RankPlaces, UuidAsNvidiaSmiPrintsIt) {
  const unsigned char b[16] = {0x8e, 0x1a, 0x0c, 0x2b, 0x00, 0x11, 0x22, 0x33,
                               0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xff};
  EXPECT_EQ(gpu_uuid_string(b), "GPU-8e1a0c2b-0011-2233-4455-66778899aaff");
}

TEST(RankPlaces, HostsInRuns) {
  std::vector<RankPlace> p(5);
  const char* hosts[] = {"a", "a", "b", "b", "a"};
  for (int i = 0; i < 5; ++i) {
    p[i].rank = i;
    p[i].host = hosts[i];
  }
  EXPECT_EQ(describe_hosts(p), "rank 0-1 on a, rank 2-3 on b, rank 4 on a");
}

}  // namespace
}  // namespace moe
