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
#include <gloo/barrier.h>
#include <gloo/math.h>
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
#include <string>
#include <vector>

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static int peer(int rank, int world, const std::string& dir, size_t bytes, int reps, int warm, double* t,
                const char* ip = "127.0.0.1") {
  gloo::transport::tcp::attr attr(ip);
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
  ctx->setTimeout(std::chrono::seconds(600));
  ctx->connectFullMesh(store, dev);
  size_t count = bytes / sizeof(float);
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; i++) buf[i] = (float)((i + (size_t)rank) % 17);
  void (*fn)(void*, const void*, const void*, size_t) = &gloo::sum<float>;
  for (int r = -warm; r < reps; r++) {
    gloo::BarrierOptions bo(ctx);
    bo.setTag(1);
    gloo::barrier(bo);
    double t0 = now_s();
    gloo::AllreduceOptions opts(ctx);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setOutput(buf.data(), count);
    opts.setReduceFunction(fn);
    opts.setTag(2);
    gloo::allreduce(opts);
    double dt = now_s() - t0;
    if (r >= 0) t[r] = dt;
  }
  gloo::BarrierOptions bo(ctx);
  bo.setTag(1);
  gloo::barrier(bo);
  return 0;
}

static int one_rank(char** argv) {
  int rank = atoi(argv[3]), world = atoi(argv[4]), reps = atoi(argv[7]);
  size_t bytes = strtoull(argv[6], nullptr, 10);
  if (world < 1 || world > 64 || rank < 0 || rank >= world || reps < 1 || bytes < sizeof(float)) return 2;
  std::vector<double> t(reps);
  try {
    if (peer(rank, world, argv[5], bytes, reps, 0, t.data(), argv[2]) != 0) return 1;
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
  char tmpl[] = "/tmp/pcclb-gloo-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  std::string dir = tmpl;
  size_t tb = sizeof(double) * (size_t)world * (size_t)reps;
  double* t = (double*)mmap(nullptr, tb, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED) return 1;
  std::vector<pid_t> pids;
  for (int r = 0; r < world; r++) {
    pid_t p = fork();
    if (p == 0) {
      int rc = 1;
      try {
        rc = peer(r, world, dir, bytes, reps, warm, t + (size_t)r * (size_t)reps);
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
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = true;
  }
  std::string rm = "rm -rf '" + dir + "'";
  if (system(rm.c_str()) != 0) fprintf(stderr, "cannot remove %s\n", dir.c_str());
  if (failed) {
    printf("RESULT impl=gloo mode=ar peers=%d bytes=%zu status=FAILED\n", world, bytes);
    return 1;
  }
  std::vector<double> v(reps);
  for (int r = 0; r < reps; r++) {
    double m = 0;
    for (int k = 0; k < world; k++) m = std::max(m, t[(size_t)k * reps + r]);
    v[r] = m;
  }
  std::sort(v.begin(), v.end());
  double med = reps % 2 ? v[reps / 2] : 0.5 * (v[reps / 2 - 1] + v[reps / 2]);
  printf("RESULT impl=gloo mode=ar peers=%d bytes=%zu conc=1 reps=%d median_s=%.6f min_s=%.6f max_s=%.6f GBps=%.4f\n",
         world, bytes, reps, med, v[0], v[reps - 1], (double)bytes / med / 1e9);
  return 0;
}
