#pragma once
// Where the ranks landed: which GPU a rank takes on its host, and each rank's host and GPU for
// the start-up log and the result's provenance. Launchers differ in what a rank sees: mpirun
// shows every rank all of its host's GPUs, Slurm's --gpus-per-task=1 (or a CUDA_VISIBLE_DEVICES
// set per rank) shows each rank only its own, so the choice must work from the counts alone.
#include <mpi.h>

#include <string>
#include <vector>

namespace moe {

// The device index (among the visible ones) for the rank that is `local_rank` of `local_ranks`
// ranks on its host, seeing `visible_gpus` GPUs: its local rank where every rank of the host can
// have its own; 0 where each rank sees a single GPU (it is then taken to be that rank's own).
// Throws UserError naming both counts and the fix where ranks outnumber several visible GPUs,
// which would leave some ranks sharing a GPU.
int gpu_for_rank(int local_rank, int local_ranks, int visible_gpus);

// This rank's index among the ranks of its host (the MPI shared-memory split of world), and their
// number.
int local_rank_and_size(MPI_Comm world, int* local_size);

std::string host_name();

// The NVIDIA kernel driver's version ("550.54.15") from the text of /proc/driver/nvidia/version,
// or "" when the text holds none. The CUDA driver API reports only the CUDA level it supports.
std::string nvidia_driver_version_from(const std::string& proc_text);
// From the file itself; "" where there is none (no NVIDIA driver, or another OS).
std::string nvidia_driver_version();

struct RankPlace {
  int rank = 0;
  std::string host;
  int gpu = -1;                  // device index as this rank sees it; -1: no GPU (the CPU backend)
  std::string pci_bus_id;        // "0000:45:00.0": the GPU whatever CUDA_VISIBLE_DEVICES renumbered
  std::string uuid;              // "GPU-8e1a...", as nvidia-smi -L prints it
  std::string gpu_name;          // "NVIDIA H200"
  std::string describe() const;  // "rank 3 on node7: GPU 1 (0000:45:00.0, NVIDIA H200)"
};

// nvidia-smi's form of a GPU's 16-byte UUID: "GPU-" and 8-4-4-4-12 hex digits.
std::string gpu_uuid_string(const unsigned char bytes[16]);

// Every rank's place, in rank order, on every rank (bounded by timeout_s like every MPI wait).
std::vector<RankPlace> gather_places(const RankPlace& mine, MPI_Comm world, double timeout_s);

// Throws UserError naming the ranks, their host and GPU, and the fix where two ranks landed on
// the same GPU. Each rank seeing a single GPU looks the same to it whether the launcher gave it
// its own or showed every rank of the host the same one; only the gathered places tell, and
// NCCL would refuse the second case with a less helpful message.
void check_no_shared_gpu(const std::vector<RankPlace>& places);

// The hosts of a CPU run in one line: "rank 0-3 on a, rank 4-7 on b".
std::string describe_hosts(const std::vector<RankPlace>& places);

}  // namespace moe
