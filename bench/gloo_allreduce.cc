/*
 * gloo_allreduce.cc - Gloo comparator for bench/run.sh.
 *
 * usage: gloo_allreduce PEERS BYTES REPS [WARMUP]
 *        gloo_allreduce peer IP RANK WORLD STORE_DIR BYTES REPS
 * The second form runs one rank on address IP (bench/wan.sh starts one per network namespace;
 * the FileStore directory is shared through the file system) and prints "TIMES RANK t..." as
 * pccl_allreduce's peers do.
 * Forks PEERS processes; each builds a gloo::rendezvous::Context over the TCP
 * transport on 127.0.0.1, rendezvous through a FileStore in a fresh /tmp
 * directory, then runs gloo::allreduce (AllreduceOptions, algorithm RING,
 * float sum, in place) of BYTES bytes. A gloo::barrier precedes each
 * repetition. Per repetition: max over ranks; then median/min/max over
 * repetitions, printed as one "RESULT ..." line. Throughput = BYTES / time.
 */
#include <gloo/allreduce.h>
#include <gloo/math.h>

#include "gloo_peer.h"

static int run_rank(const std::shared_ptr<gloo::rendezvous::Context>& ctx, int rank, int, const void* arg, int reps,
                    int warm, double* t) {
  size_t count = *static_cast<const size_t*>(arg) / sizeof(float);
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; i++) buf[i] = (float)((i + (size_t)rank) % 17);
  void (*fn)(void*, const void*, const void*, size_t) = &gloo::sum<float>;
  for (int r = -warm; r < reps; r++) {
    gloo_rank_barrier(ctx);
    double t0 = gloo_now_s();
    gloo::AllreduceOptions opts(ctx);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setOutput(buf.data(), count);
    opts.setReduceFunction(fn);
    opts.setTag(2);
    gloo::allreduce(opts);
    double dt = gloo_now_s() - t0;
    if (r >= 0) t[r] = dt;
  }
  return 0;
}

static int one_rank(char** argv) {
  int rank = atoi(argv[3]), world = atoi(argv[4]), reps = atoi(argv[7]);
  size_t bytes = strtoull(argv[6], nullptr, 10);
  if (world < 1 || world > 64 || rank < 0 || rank >= world || reps < 1 || bytes < sizeof(float)) return 2;
  std::vector<double> t(reps);
  try {
    auto ctx = gloo_connect(rank, world, argv[5], argv[2]);
    if (run_rank(ctx, rank, world, &bytes, reps, 0, t.data()) != 0) return 1;
    gloo_rank_barrier(ctx);
  } catch (const std::exception& e) {
    fprintf(stderr, "gloo rank %d: %s\n", rank, e.what());
    return 1;
  }
  printf("TIMES %d", rank);
  for (double v : t) printf(" %.6f", v);
  printf("\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 8 && std::string(argv[1]) == "peer") return one_rank(argv);
  if (argc < 4) {
    fprintf(stderr, "usage: %s PEERS BYTES REPS [WARMUP]\n", argv[0]);
    return 2;
  }
  int world = atoi(argv[1]);
  size_t bytes = strtoull(argv[2], nullptr, 10);
  int reps = atoi(argv[3]), warm = argc > 4 ? atoi(argv[4]) : 1;
  if (world < 1 || world > 64 || reps < 1 || bytes < sizeof(float)) return 2;
  GlooStats s;
  if (gloo_fork_ranks(world, reps, warm, run_rank, &bytes, &s) != 0) {
    printf("RESULT impl=gloo mode=ar peers=%d bytes=%zu status=FAILED\n", world, bytes);
    return 1;
  }
  printf("RESULT impl=gloo mode=ar peers=%d bytes=%zu conc=1 reps=%d median_s=%.6f min_s=%.6f max_s=%.6f GBps=%.4f\n",
         world, bytes, reps, s.med, s.min, s.max, (double)bytes / s.med / 1e9);
  return 0;
}
