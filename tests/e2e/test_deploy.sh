#!/usr/bin/env bash
# test_deploy.sh BIN_DIR - deploy/Containerfile, deploy/Containerfile.cuda and deploy/k8s/**/*.yaml pass
# deploy_check.py (no registry, engine or cluster here: the checks Debian 12 allows), and each kind of mistake it
# looks for, planted in a copy, fails it.
source "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CHECK="/usr/bin/python3 $REPO/tests/e2e/deploy_check.py --bin $BIN"
/usr/bin/python3 -c 'import yaml' 2>/dev/null || fail "python3-yaml missing (scripts/deps.sh)"
$CHECK --repo "$REPO" > "$WORK/check.log" 2>&1 || fail "deploy_check: $(cat "$WORK/check.log")"

# mutant NAME FILE SED EXPECTED: a copy of the repository's deploy files with FILE edited by SED must fail with
# a line matching EXPECTED.
mutant() {
    local name=$1 file=$2 expr=$3 expect=$4 dir=$WORK/$1
    mkdir -p "$dir"
    cp -r "$REPO/deploy" "$REPO/scripts" "$REPO/README.md" "$dir/"
    sed -i "$expr" "$dir/$file"
    cmp -s "$dir/$file" "$REPO/$file" && fail "$name: the edit changed nothing"
    if $CHECK --repo "$dir" > "$WORK/$name.log" 2>&1; then fail "$name: deploy_check passed"; fi
    grep -q -- "$expect" "$WORK/$name.log" || fail "$name: expected '$expect', got: $(cat "$WORK/$name.log")"
}
mutant copy_source deploy/Containerfile 's|^COPY \. /src|COPY nonexistent /src|' "COPY source nonexistent"
mutant run_command deploy/Containerfile 's|&& cmake --install|\&\& ninja-install|' "RUN ninja-install"
mutant run_package deploy/Containerfile 's| cmake pkg-config| pkg-config|' "RUN cmake: from package cmake"
mutant apt_name deploy/Containerfile 's|libmicrohttpd12|libmicrohttpd99|' "libmicrohttpd99 is not in Debian 12"
mutant runtime_lib deploy/Containerfile 's|libuv1 libcjson1|libcjson1|' "libuv.so.1"
mutant root_user deploy/Containerfile 's|^USER 10001:10001|USER root|' "runs as root"
mutant target_port deploy/k8s/master.yaml 's|targetPort: admin|targetPort: http|' "targetPort http"
mutant selector deploy/k8s/peers.yaml '/matchLabels:/,/component:/s/component: peer/component: worker/' "does not match the template"
mutant env_name deploy/k8s/peers.yaml 's|PCCL_MASTER_RECONNECT_MS|PCCL_RECONNECT_MS|' "env PCCL_RECONNECT_MS"
mutant flag deploy/k8s/peers.yaml 's|"--min-world"|"--min-peers"|' "no flag --min-peers"
mutant master_addr deploy/k8s/peers.yaml 's|pccl-master:48148|pccl-master:48152|' "does not reach a master"
mutant exposed deploy/Containerfile 's|^EXPOSE 48148 48150 48152|EXPOSE 48148 48150|' "containerPort 48152 is not EXPOSEd"
# CUDA image
mutant cuda_build_base deploy/Containerfile.cuda 's|-devel-ubuntu22.04 AS build|-runtime-ubuntu22.04 AS build|' \
    "must be a CUDA devel image"
mutant cuda_base deploy/Containerfile.cuda 's|^FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04|FROM alpine:3|' \
    "base image alpine:3 is not a CUDA image"
mutant cuda_flag deploy/Containerfile.cuda 's|-DPCCL_WITH_CUDA=ON|-DPCCL_WITH_CUDA=OFF|' "building with -DPCCL_WITH_CUDA=ON"
# run key
mutant open_run deploy/k8s/master.yaml 's|, "--key-file", "/run/pccl/run.key"||' "pccl master\` has no --key-file"
mutant key_mode deploy/k8s/peers.yaml 's|"install", "-m", "0600"|"install", "-m", "0644"|' "no init container writes it"
mutant key_path deploy/k8s/peers.yaml 's|"--key-file", "/run/pccl/run.key"|"--key-file", "/etc/pccl/run-key-secret/key"|' \
    "no volume is mounted there"
mutant key_disk deploy/k8s/master.yaml 's|medium: Memory|medium: ""|' "is not an emptyDir in memory"
# NetworkPolicy
mutant admin_open deploy/k8s/networkpolicy.yaml 's|metadata.name: monitoring|metadata.name: default|' \
    "not only the monitoring namespace"
mutant p2p_closed deploy/k8s/networkpolicy.yaml 's|port: p2p$|port: 48151|' "no NetworkPolicy admits port 48150 (p2p, p2p)"
mutant control_from deploy/k8s/networkpolicy.yaml '0,/component: peer$/s//component: worker/' \
    "control port 48148: the peers of"
mutant all_ports deploy/k8s/networkpolicy.yaml '/ports:/,/protocol: TCP/d' "admits every port"
mutant ephemeral_p2p deploy/k8s/peers.yaml 's|"--p2p-port", "48150",||' "no --p2p-port"
# reconnect window against the master's replacement on a lost node
mutant slow_eviction deploy/k8s/master.yaml 's|tolerationSeconds: 30|tolerationSeconds: 300|' \
    "not longer than the master's replacement on a lost node (50 s node-monitor-grace-period + 300 s toleration"
mutant short_window deploy/k8s/peers.yaml 's|value: "300000"|value: "150000"|' "PCCL_MASTER_RECONNECT_MS=150000: not longer"
mutant rolling_master deploy/k8s/master.yaml 's|type: Recreate|type: RollingUpdate|' "strategy Recreate"
mutant no_startup deploy/k8s/master.yaml 's|startupProbe:|x-startupProbe:|' \
    "no startupProbe"
# GPU variant
mutant gpu_limit deploy/k8s/gpu/peers-gpu.yaml '/nvidia.com\/gpu: 1/d' "without a \`nvidia.com/gpu\` limit"
mutant gpu_image deploy/k8s/gpu/peers-gpu.yaml 's|image: pccl:0.1.0-cuda|image: pccl:0.1.0|' "a GPU peer on the CPU image"
# monitoring
mutant scrape_port deploy/k8s/master.yaml 's|prometheus.io/port: "48152"|prometheus.io/port: "48153"|' \
    "do not let Prometheus scrape"
mutant monitor_path deploy/k8s/monitoring/servicemonitor.yaml 's|path: /metrics|path: /stats|' "endpoint path /stats"
mutant monitor_port deploy/k8s/monitoring/servicemonitor.yaml 's|- port: admin|- port: control|' \
    "does not reach a master's admin port"
echo "deploy ok"
