// The benchmark families of bitnet-dsl-bench, registered at start-up with the session they share.
#pragma once
#include "bench/bench_session.h"
#include "dsl/builder.h"
#include "ops/target.h"
#include "ops/ternary.h"

namespace bdsl::bench {

void register_bandwidth_benchmarks(BenchSession& s);
void register_matvec_benchmarks(BenchSession& s);
void register_projection_benchmarks(BenchSession& s);
void register_matmul_benchmarks(BenchSession& s);
void register_coop_probe_benchmarks(BenchSession& s);
void register_attention_benchmarks(BenchSession& s);
void register_attention_prefill_benchmarks(BenchSession& s);
void register_model_benchmarks(BenchSession& s);
void register_batch_benchmarks(BenchSession& s);
void register_startup_benchmarks(BenchSession& s);
void register_grid_sync_benchmarks(BenchSession& s);
void register_persistent_chain_benchmarks(BenchSession& s);
void register_decode_layer_chain_benchmarks(BenchSession& s);

// persistent_chain/'s matvec options (ops/experimental/persistent_chain.h; also in kernel/, for its
// register count).
ops::MatvecOptions persistent_chain_options(bool quick);
void register_kernel_stats_benchmarks(BenchSession& s);

}  // namespace bdsl::bench
