#!/bin/sh
# Offline checks of deploy/ (called by `make test-deploy`):
#   - tests/deploy/check.py: the Kubernetes manifests against the schemas
#     kubernetes-validate (PyPI) bundles, the custom resources against
#     check.py's own schemas, and the references between them and tram;
#   - promtool (from Debian's prometheus package, unpacked, not installed:
#     no service starts) checks the rules and runs their unit tests;
#   - then planted faults, each of which check.py must catch.
set -e
cd "$(dirname "$0")/../.."
VENV=build/venv-deploy
PINS="kubernetes-validate==1.37.0 PyYAML==6.0.3"
if ! "$VENV/bin/python" -c 'import kubernetes_validate, yaml; assert kubernetes_validate.__version__ == "1.37.0"' 2>/dev/null; then
    echo "tram: setting up $VENV with $PINS"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check $PINS
fi
PROM=build/prometheus
if [ ! -x "$PROM/usr/bin/promtool" ]; then
    echo "tram: unpacking promtool from Debian's prometheus package"
    rm -rf "$PROM" && mkdir -p "$PROM"
    (cd "$PROM" && apt-get download prometheus >/dev/null 2>&1 ||
        { [ "$(id -u)" = 0 ] && apt-get update -qq && apt-get download prometheus >/dev/null; })
    dpkg-deb -x "$PROM"/prometheus_*.deb "$PROM"
fi
"$VENV/bin/python" tests/deploy/check.py
(cd deploy/prometheus && "../../$PROM/usr/bin/promtool" check rules tram-rules.yaml &&
    "../../$PROM/usr/bin/promtool" test rules tram-rules.test.yaml)

# Planted faults: a copy of deploy/ with one thing broken, which must fail.
plant() {
    rm -rf build/deploy-planted && cp -r deploy build/deploy-planted
    sed -i "$2" "build/deploy-planted/$1"
    if DEPLOY_ROOT=build/deploy-planted "$VENV/bin/python" tests/deploy/check.py >build/deploy-planted.log 2>&1; then
        echo "deploy: the planted fault '$3' was not caught"; exit 1
    fi
    echo "deploy: planted fault caught: $3 ($(grep -m1 FAIL build/deploy-planted.log))"
}
plant kubernetes/base/deployment.yaml 's/  replicas: 2/  replicas: two/' "a core field of the wrong type"
plant kubernetes/base/deployment.yaml 's/      terminationGracePeriodSeconds: 45/      terminationGracePeriodSeconds: 20/' "a drain longer than the grace period"
plant kubernetes/base/service.yaml 's/targetPort: http/targetPort: web/' "a Service port the pod lacks"
plant kubernetes/inference-extension/inferencepool.yaml 's/  targetPorts:/  targetPortz:/' "an unknown InferencePool field"
plant kubernetes/hpa/hpa.yaml 's/name: tram_requests_waiting/name: tram_queue/' "an HPA metric no adapter rule serves"
plant grafana/tram-dashboard.json 's/vllm:kv_cache_usage_perc/vllm:kv_usage/' "a metric tram does not export"
plant kubernetes/lora/inferenceobjectives.yaml '0,/    name: tram-smollm2/s//    name: tram-other/' "an InferenceObjective for a pool not here"
plant kubernetes/lora/kustomization.yaml 's|sql=/opt/tram/adapters/sql|sql=/data/sql|' "an adapter in no mounted volume"
plant kubernetes/lora/kustomization.yaml 's|args/18|args/17|' "a patch whose test no longer holds"
plant kubernetes/lora/kustomization.yaml 's/value: vllm:lora_requests_info/value: vllm:lora_info/' "an adapter gauge tram does not export"
rm -rf build/deploy-planted build/deploy-planted.log
