/*
 * gloo_coll.cc - Gloo comparator of pccl_coll (bench/coll.sh).
 *
 * usage: gloo_coll broadcast|all_gather|reduce_scatter PEERS BYTES REPS [WARMUP]
 * BYTES as pccl_coll counts it: the broadcast buffer, the all-gather's output, the reduce-scatter's
 * input (each rank's block BYTES / PEERS). Forks PEERS processes on the TCP transport (127.0.0.1,
 * FileStore rendezvous in a fresh /tmp directory), as gloo_allreduce does:
 *  broadcast:      gloo::broadcast from rank 0, the root's input and every rank's output apart;
 *  all_gather:     gloo::allgather (ring), input and output apart;
 *  reduce_scatter: gloo::ReduceScatterHalvingDoubling, float sum, in place (Gloo has no out-of-place
 *                  reduce-scatter); rank r's block ends at the start of the buffer.
 * A gloo::barrier precedes each repetition; time = max over ranks, then median/min/max over repetitions,
 * printed as one "RESULT impl=gloo mode=coll ..." line. Outputs are checked after the last repetition
 * (the in-place reduce-scatter after its first warm-up, which is forced to at least one).
 */
#include <gloo/allgather.h>
#include <gloo/broadcast.h>
#include <gloo/reduce_scatter.h>

#include <cstring>

#include "gloo_peer.h"

namespace {

float val(int k, size_t i) { return (float)((i + (size_t)k) % 17); }

const char* const kKinds[] = {"broadcast", "all_gather", "reduce_scatter"};

// Index of the first wrong element of rank's output, or -1.
long check(int kind, const std::vector<float>& out, size_t count, int rank, int world) {
  size_t block = count / world, off = kind == 2 ? (size_t)rank * block : 0, n = kind == 2 ? block : block * world;
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    if (kind == 0) want = val(0, i);
    else if (kind == 1) want = val((int)(i / block), i % block);
    else
      for (int k = 0; k < world; k++) want += val(k, off + i);
    if (out[i] != want) return (long)i;
  }
  return -1;
}

struct Coll {
  int kind;
  size_t bytes;
};

int run_rank(const std::shared_ptr<gloo::rendezvous::Context>& ctx, int rank, int world, const void* arg, int reps,
             int warm, double* t) {
  const Coll& c = *static_cast<const Coll*>(arg);
  size_t count = c.bytes / sizeof(float), block = count / world;
  std::vector<float> in(c.kind == 1 ? block : count), out(c.kind == 2 ? 0 : c.kind == 1 ? block * world : count);
  for (size_t i = 0; i < in.size(); i++) in[i] = val(rank, i);
  std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> rs;
  if (c.kind == 2) {
    rs.reset(new gloo::ReduceScatterHalvingDoubling<float>(ctx, {in.data()}, (int)count,
                                                            std::vector<int>(world, (int)block)));
    warm = std::max(warm, 1);
  }
  for (int r = -warm; r < reps; r++) {
    gloo_rank_barrier(ctx);
    double t0 = gloo_now_s();
    if (c.kind == 0) {
      gloo::BroadcastOptions o(ctx);
      o.setRoot(0);
      if (rank == 0) o.setInput(in.data(), count);
      o.setOutput(out.data(), count);
      o.setTag(2);
      gloo::broadcast(o);
    } else if (c.kind == 1) {
      gloo::AllgatherOptions o(ctx);
      o.setInput(in.data(), block);
      o.setOutput(out.data(), out.size());
      o.setTag(2);
      gloo::allgather(o);
    } else {
      rs->run();
    }
    double dt = gloo_now_s() - t0;
    if (r >= 0) t[r] = dt;
    if (r == -warm && c.kind == 2) {  // in place: the sums are right only after the first run
      long bad = check(2, in, count, rank, world);
      if (bad >= 0) throw std::runtime_error("reduce_scatter: wrong output at element " + std::to_string(bad));
    }
  }
  long bad = c.kind == 2 ? -1 : check(c.kind, out, count, rank, world);
  if (bad >= 0) throw std::runtime_error(std::string(kKinds[c.kind]) + ": wrong output at element " + std::to_string(bad));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int kind = -1;
  for (int k = 0; argc > 1 && k < 3; k++)
    if (std::string(argv[1]) == kKinds[k]) kind = k;
  if (argc < 5 || kind < 0) {
    fprintf(stderr, "usage: %s broadcast|all_gather|reduce_scatter PEERS BYTES REPS [WARMUP]\n", argv[0]);
    return 2;
  }
  int world = atoi(argv[2]);
  Coll c{kind, (size_t)strtoull(argv[3], nullptr, 10)};
  int reps = atoi(argv[4]), warm = argc > 5 ? atoi(argv[5]) : 1;
  if (world < 2 || world > 64 || reps < 1 || warm < 0 || c.bytes < sizeof(float) * world) return 2;
  GlooStats s;
  if (gloo_fork_ranks(world, reps, warm, run_rank, &c, &s) != 0) {
    printf("RESULT impl=gloo mode=coll coll=%s peers=%d bytes=%zu status=FAILED\n", kKinds[kind], world, c.bytes);
    return 1;
  }
  printf("RESULT impl=gloo mode=coll coll=%s peers=%d bytes=%zu reps=%d median_s=%.6f min_s=%.6f max_s=%.6f "
         "GBps=%.4f\n",
         kKinds[kind], world, c.bytes, reps, s.med, s.min, s.max, (double)c.bytes / s.med / 1e9);
  return 0;
}
