// gloo_peer.h - what the Gloo comparators share (gloo_allreduce.cc, gloo_coll.cc): the clock, the
// rendezvous over the TCP transport, the barrier, and the harness that forks the ranks and reduces
// their times (max over ranks per repetition, then median, min, max over repetitions).
#ifndef PCCL_BENCH_GLOO_PEER_H
#define PCCL_BENCH_GLOO_PEER_H

#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

inline double gloo_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A full mesh over TCP on address ip; the ranks meet through files in dir (shared by every rank).
inline std::shared_ptr<gloo::rendezvous::Context> gloo_connect(int rank, int world, const std::string& dir,
                                                               const char* ip) {
  gloo::transport::tcp::attr attr(ip);
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
  ctx->setTimeout(std::chrono::seconds(600));
  ctx->connectFullMesh(store, dev);
  return ctx;
}

inline void gloo_rank_barrier(const std::shared_ptr<gloo::rendezvous::Context>& ctx) {
  gloo::BarrierOptions bo(ctx);
  bo.setTag(1);
  gloo::barrier(bo);
}

// One rank's benchmark: warm untimed and reps timed operations, t[rep] in seconds; 0 on success.
using GlooRankFn = int (*)(const std::shared_ptr<gloo::rendezvous::Context>& ctx, int rank, int world,
                           const void* arg, int reps, int warm, double* t);

struct GlooStats {
  double med, min, max;
};

// Forks world ranks on 127.0.0.1, each running fn after the rendezvous and a barrier after it (nobody
// leaves while others run). 0 and *s filled when every rank exited 0, else -1.
inline int gloo_fork_ranks(int world, int reps, int warm, GlooRankFn fn, const void* arg, GlooStats* s) {
  char tmpl[] = "/tmp/pcclb-gloo-XXXXXX";
  if (!mkdtemp(tmpl)) return -1;
  std::string dir = tmpl;
  size_t tb = sizeof(double) * (size_t)world * (size_t)reps;
  double* t = (double*)mmap(nullptr, tb, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED) return -1;
  std::vector<pid_t> pids;
  for (int r = 0; r < world; r++) {
    pid_t p = fork();
    if (p == 0) {
      int rc = 1;
      try {
        auto ctx = gloo_connect(r, world, dir, "127.0.0.1");
        rc = fn(ctx, r, world, arg, reps, warm, t + (size_t)r * (size_t)reps);
        gloo_rank_barrier(ctx);
      } catch (const std::exception& e) {
        fprintf(stderr, "gloo rank %d: %s\n", r, e.what());
      }
      fflush(stdout);
      _exit(rc);
    }
    pids.push_back(p);
  }
  bool failed = false;
  for (pid_t p : pids) {
    int st;
    if (p < 0 || waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = true;
  }
  std::string rm = "rm -rf '" + dir + "'";
  if (system(rm.c_str()) != 0) fprintf(stderr, "cannot remove %s\n", dir.c_str());
  if (failed) return -1;
  std::vector<double> v(reps);
  for (int r = 0; r < reps; r++) {
    double m = 0;
    for (int k = 0; k < world; k++) m = std::max(m, t[(size_t)k * reps + r]);
    v[r] = m;
  }
  std::sort(v.begin(), v.end());
  s->med = reps % 2 ? v[reps / 2] : 0.5 * (v[reps / 2 - 1] + v[reps / 2]);
  s->min = v[0];
  s->max = v[reps - 1];
  munmap(t, tb);
  return 0;
}

#endif  // PCCL_BENCH_GLOO_PEER_H
