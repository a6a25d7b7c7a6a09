#!/usr/bin/env bash
# test_deploy.sh BIN_DIR - deploy/Containerfile and deploy/k8s/*.yaml pass deploy_check.py (no registry, engine
# or cluster here: the checks Debian 12 allows), and each kind of mistake it looks for, planted in a copy, fails it.
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
mutant exposed deploy/Containerfile 's|^EXPOSE 48148 48152|EXPOSE 48148|' "containerPort 48152 is not EXPOSEd"
echo "deploy ok"
