#pragma once
// Rank 0's outputs: the readable summary (nccl-tests style) and the result JSON with the same keys.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "app/run_result.h"

namespace moe {

nlohmann::json result_to_json(const RunResult& r);
// Where and from what a result came: time, version, commit, host, command line, compiler, MPI,
// backend and its libraries, and every rank's place (the result JSON's "provenance").
nlohmann::json provenance(const RunResult& r);
// The readable report to `out`: stdout, or stderr when stdout carries the result JSON (--out -).
void print_summary(const RunResult& r, std::FILE* out);
// The GPUs' clocks (core/clocks.h): the result JSON's timing.clocks, and the "# clocks:" line
// (shared with moebench gemm, whose GEMMs run at other clocks than a step's).
nlohmann::json clocks_json(const ClocksReport& c);
// The grouped kernel's tile rows over the rows routed (core/grouped_gemm.h's GroupedTileRows) as
// the result JSON gives them: {tile, over_rows}, or null where unknown (0).
nlohmann::json tile_rows_json(double over_rows);
// `over`: what the samples were taken over ("the timed steps").
void print_clocks(const ClocksReport& c, std::FILE* out, const char* over);
// MOE_GIT_COMMIT, where set, must be a full sha (40 hex digits): a short one would be ignored and
// the provenance fall back to git, which names whatever checkout the binary sits in. Throws a
// usage error naming the variable and the fix.
void check_git_commit_env();
// Throws a UserError naming --out and the fix unless a result file can be written at path: not a
// directory, its directory exists and takes a file (probed, then removed). Before any work. "-"
// (stdout) always passes.
void check_json_target(const std::string& path);
// Refuses (a user error, `what` naming the option and path) a directory no file can be written in.
void check_can_write_in(const std::string& dir, const std::string& what);
// Writes JSON to path via a temporary file and rename, so no reader ever sees a partial file; on
// failure the temporary file is removed.
void write_json_atomically(const std::string& path, const nlohmann::json& j);

}  // namespace moe
