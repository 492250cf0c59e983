"""Offline checks of deploy/ (run by tests/deploy/run.sh; exits 1 on a failure).

- Every kustomization under deploy/kubernetes is assembled as kustomize
  would for what these files use (resources, inline JSON 6902 patches,
  namespace, images), and each
  object of a core kind is validated by kubernetes-validate against the
  Kubernetes 1.37 OpenAPI schemas it bundles, strictly (unknown fields fail).
- The custom resources kubernetes-validate has no schema for (InferencePool,
  InferenceObjective, HTTPRoute, KEDA's ScaledObject, the endpoint picker's EndpointPickerConfig,
  prometheus-adapter's rules) are checked against the schemas in CRD_SCHEMAS
  below, written here from those projects' API references: the fields used
  here, their types and the required ones.  They are not the upstream CRDs.
- Cross references: selectors match the pods, ports and names resolve, the
  HPA's metrics are the adapter's, the probes are routes tram serves, every
  `tram serve` flag is one bin/tram knows, the drain fits in the grace
  period, LoRA adapters lie in volumes tram mounts, and every tram metric
  the rules, the dashboard, the adapter, KEDA and the endpoint picker name
  is one server/metrics.c exports.
"""
import json
import os
import re
import subprocess
import sys

import jsonschema
import kubernetes_validate
import yaml

ROOT = os.environ.get("DEPLOY_ROOT", "deploy")
K8S_VERSION = "1.37.0"
failures = []


def fail(where, what):
    failures.append(f"{where}: {what}")


# ------------------------------------------------------------ assembling

def load_kustomization(directory):
    """The objects of a kustomization, with its patches, namespace and images applied."""
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    objects = []
    for res in k.get("resources", []):
        path = os.path.normpath(os.path.join(directory, res))
        if os.path.isdir(path):
            objects += load_kustomization(path)
        elif os.path.isfile(path):
            with open(path) as f:
                objects += [(path, d) for d in yaml.safe_load_all(f) if d]
        else:
            fail(directory, f"resource {res} does not exist")
    for patch in k.get("patches", []):
        apply_patch(directory, objects, patch)
    for path, obj in objects:
        if "namespace" in k and obj["kind"] != "Namespace":
            obj.setdefault("metadata", {})["namespace"] = k["namespace"]
        for pod in pod_specs(obj):
            for c in pod.get("containers", []):
                for img in k.get("images", []):
                    if c["image"].split(":")[0] == img["name"]:
                        c["image"] = f"{img.get('newName', img['name'])}:{img['newTag']}"
    return objects


def apply_patch(directory, objects, patch):
    """An inline JSON 6902 patch (add, replace, test) on the objects its
    target names by kind and name, as kustomize applies it; one that
    targets nothing or whose path does not resolve fails."""
    target = patch.get("target", {})
    hits = [o for _, o in objects if o["kind"] == target.get("kind")
            and o["metadata"]["name"] == target.get("name")]
    if not hits:
        return fail(directory, f"a patch targets {target}, which no resource is")
    for obj in hits:
        for op in yaml.safe_load(patch["patch"]):
            *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
            try:
                node = obj
                for p in parents:
                    node = node[int(p)] if isinstance(node, list) else node[p]
                key = last if isinstance(node, dict) else len(node) if last == "-" else int(last)
                if op["op"] == "test" and node[key] != op["value"]:
                    fail(directory, f"patch test {op['path']}: {node[key]!r} is not {op['value']!r}")
                elif op["op"] == "replace":
                    node[key]  # must exist
                    node[key] = op["value"]
                elif op["op"] == "add" and isinstance(node, list):
                    node.insert(key, op["value"])
                elif op["op"] == "add":
                    node[key] = op["value"]
                elif op["op"] != "test":
                    fail(directory, f"patch op {op['op']} is not one this check applies")
            except (KeyError, IndexError, ValueError, TypeError):
                fail(directory, f"patch path {op['path']} does not resolve in {target}")


def pod_specs(obj):
    if obj.get("kind") == "Deployment":
        return [obj["spec"]["template"]["spec"]]
    return []


# ------------------------------------------------------------ schemas

def obj_schema(required, properties):
    return {"type": "object", "required": required, "properties": properties}


NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 253}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
LABELS = {"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}}
META = obj_schema(["name"], {"name": NAME, "namespace": NAME})


def crd(api, kind, spec):
    return {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
            "additionalProperties": False,
            "properties": {"apiVersion": {"const": api}, "kind": {"const": kind},
                           "metadata": META, "spec": spec}}


CRD_SCHEMAS = {
    "InferencePool": crd("inference.networking.k8s.io/v1", "InferencePool", {
        "type": "object", "additionalProperties": False,
        "required": ["selector", "targetPorts", "endpointPickerRef"],
        "properties": {
            "selector": {"type": "object", "additionalProperties": False,
                         "required": ["matchLabels"], "properties": {"matchLabels": LABELS}},
            "targetPorts": {"type": "array", "minItems": 1, "maxItems": 1,
                            "items": obj_schema(["number"], {"number": PORT})},
            "endpointPickerRef": {
                "type": "object", "additionalProperties": False, "required": ["name"],
                "properties": {"group": {"type": "string"}, "kind": {"type": "string"},
                               "name": NAME,
                               "port": obj_schema(["number"], {"number": PORT}),
                               "failureMode": {"enum": ["FailOpen", "FailClose"]}}}}}),
    "InferenceObjective": crd("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective", {
        "type": "object", "additionalProperties": False, "required": ["poolRef"],
        "properties": {
            "priority": {"type": "integer"},
            "poolRef": {"type": "object", "additionalProperties": False, "required": ["name"],
                        "properties": {"group": {"const": "inference.networking.k8s.io"},
                                       "kind": {"const": "InferencePool"}, "name": NAME}}}}),
    "HTTPRoute": crd("gateway.networking.k8s.io/v1", "HTTPRoute", {
        "type": "object", "required": ["parentRefs", "rules"],
        "properties": {
            "parentRefs": {"type": "array", "minItems": 1,
                           "items": obj_schema(["name"], {"name": NAME})},
            "rules": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["backendRefs"],
                "properties": {"backendRefs": {"type": "array", "minItems": 1, "items": obj_schema(
                    ["name"], {"group": {"type": "string"}, "kind": {"type": "string"},
                               "name": NAME})},
                    "timeouts": {"type": "object", "properties": {
                        "request": {"type": "string", "pattern": r"^[0-9]+(ms|s|m|h)$"}}}}}}}}),
    "ScaledObject": crd("keda.sh/v1alpha1", "ScaledObject", {
        "type": "object", "required": ["scaleTargetRef", "triggers"],
        "properties": {
            "scaleTargetRef": obj_schema(["name"], {"name": NAME}),
            "minReplicaCount": {"type": "integer", "minimum": 0},
            "maxReplicaCount": {"type": "integer", "minimum": 1},
            "pollingInterval": {"type": "integer", "minimum": 1},
            "cooldownPeriod": {"type": "integer", "minimum": 0},
            "triggers": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["type", "metadata"],
                "properties": {"type": {"const": "prometheus"}, "metadata": {
                    "type": "object", "required": ["serverAddress", "query", "threshold"],
                    "additionalProperties": {"type": "string"}}}}}}}),
}

EPP_CONFIG_SCHEMA = {
    "type": "object", "required": ["apiVersion", "kind", "plugins", "schedulingProfiles"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "inference.networking.x-k8s.io/v1alpha1"},
        "kind": {"const": "EndpointPickerConfig"},
        "plugins": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["type"], "additionalProperties": False,
            "properties": {"type": {"type": "string"}, "name": {"type": "string"},
                           "parameters": {"type": "object"}}}},
        "schedulingProfiles": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["name", "plugins"],
            "properties": {"name": {"type": "string"}, "plugins": {"type": "array", "items": {
                "type": "object", "required": ["pluginRef"], "additionalProperties": False,
                "properties": {"pluginRef": {"type": "string"},
                               "weight": {"type": "number"}}}}}}}}}

ADAPTER_SCHEMA = {
    "type": "object", "required": ["rules"], "properties": {"rules": {
        "type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["seriesQuery", "resources", "name", "metricsQuery"],
            "additionalProperties": False,
            "properties": {"seriesQuery": {"type": "string"}, "metricsQuery": {"type": "string"},
                           "resources": {"type": "object"},
                           "name": obj_schema(["matches", "as"], {
                               "matches": {"type": "string"}, "as": {"type": "string"}})}}}}}


def validate_schema(where, schema, data):
    for e in jsonschema.Draft202012Validator(schema).iter_errors(data):
        fail(where, f"{'/'.join(str(p) for p in e.absolute_path)}: {e.message}")


def validate_object(path, obj):
    where = f"{path} {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    if obj["kind"] in CRD_SCHEMAS:
        validate_schema(where, CRD_SCHEMAS[obj["kind"]], obj)
        return
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        fail(where, "no schema: neither Kubernetes 1.37 nor CRD_SCHEMAS knows this kind")
    except kubernetes_validate.ValidationError as e:
        fail(where, f"{'/'.join(str(p) for p in e.path)}: {e.message}")


# ------------------------------------------------------------ cross references

def by_kind(objects, kind):
    return [o for _, o in objects if o["kind"] == kind]


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def tram_container(objects):
    for d in by_kind(objects, "Deployment"):
        for c in d["spec"]["template"]["spec"]["containers"]:
            if c["name"] == "tram":
                return d, c
    return None, None


def flag_value(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


def check_tram_pods(where, objects, serve_help, routes):
    d, c = tram_container(objects)
    if not d:
        return fail(where, "no Deployment runs a container named tram")
    labels = d["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for flag in [a for a in c["args"] if a.startswith("--")]:
        if not re.search(rf"^\s+(-\w, )?{re.escape(flag)}\b", serve_help, re.M):
            fail(where, f"tram serve has no flag {flag}")
    if str(ports.get("http")) != flag_value(c["args"], "--port"):
        fail(where, "the container port is not tram's --port")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        path = c[probe]["httpGet"]["path"]
        if path not in routes:
            fail(where, f"{probe} asks {path}, which tram does not serve")
    grace = d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    pre_stop = c["lifecycle"]["preStop"]["sleep"]["seconds"]
    drain = float(flag_value(c["args"], "--drain-timeout") or 30)
    if pre_stop + drain + 5 >= grace:  # 5: tram's grace for aborted requests to report
        fail(where, f"preStop {pre_stop} s + drain {drain} s + 5 s do not fit in {grace} s")
    for s in by_kind(objects, "Service"):
        if s["metadata"]["name"] == "tram":
            if not matches(s["spec"]["selector"], labels):
                fail(where, "the Service selects no tram pod")
            for p in s["spec"]["ports"]:
                if p["targetPort"] not in ports:
                    fail(where, f"the Service targets port {p['targetPort']}, not the pod's")
    for pdb in by_kind(objects, "PodDisruptionBudget"):
        if not matches(pdb["spec"]["selector"]["matchLabels"], labels):
            fail(where, "the PodDisruptionBudget selects no tram pod")
    return d, labels, ports


def check_lora(where, objects):
    """Adapters: every --lora-modules path lies in a volume the tram container
    mounts, and an endpoint picker reading the LoRA gauge has a tram that
    exports it (tram writes vllm:lora_requests_info only with adapter slots)."""
    d, c = tram_container(objects)
    modules = flag_value(c["args"], "--lora-modules") if c else None
    mounts = [m["mountPath"].rstrip("/") + "/" for m in (c or {}).get("volumeMounts", [])]
    for module in (modules or "").split(","):
        path = module.partition("=")[2]
        if module and not any(path.startswith(m) for m in mounts):
            fail(where, f"the adapter {module} is in no volume the tram container mounts")
    for e in by_kind(objects, "Deployment"):
        for ec in e["spec"]["template"]["spec"]["containers"]:
            metric = flag_value(ec.get("args", []), "--lora-info-metric")
            if metric and not modules and not flag_value(c["args"] if c else [], "--max-loras"):
                fail(where, f"the endpoint picker reads {metric}, which tram exports only with adapters")


def check_scalers(where, objects, deployment, adapter_names):
    for hpa in by_kind(objects, "HorizontalPodAutoscaler"):
        if hpa["spec"]["scaleTargetRef"]["name"] != deployment["metadata"]["name"]:
            fail(where, "the HPA scales another Deployment")
        for m in hpa["spec"]["metrics"]:
            if m["type"] != "Pods" or m["pods"]["metric"]["name"] not in adapter_names:
                fail(where, f"the HPA's metric {m} is none that prometheus-adapter serves")
    for so in by_kind(objects, "ScaledObject"):
        if so["spec"]["scaleTargetRef"]["name"] != deployment["metadata"]["name"]:
            fail(where, "the ScaledObject scales another Deployment")


def check_inference_pool(where, objects, labels, ports):
    services = {s["metadata"]["name"]: s for s in by_kind(objects, "Service")}
    pools = by_kind(objects, "InferencePool")
    for pool in pools:
        spec = pool["spec"]
        if not matches(spec["selector"]["matchLabels"], labels):
            fail(where, "the InferencePool selects no tram pod")
        if spec["targetPorts"][0]["number"] != ports.get("http"):
            fail(where, "the InferencePool's target port is not tram's")
        epp = services.get(spec["endpointPickerRef"]["name"])
        if not epp or spec["endpointPickerRef"]["port"]["number"] not in [
                p["port"] for p in epp["spec"]["ports"]]:
            fail(where, "the InferencePool's endpoint picker is no Service port here")
    pool_names = {p["metadata"]["name"] for p in pools}
    for obj in by_kind(objects, "InferenceObjective"):
        if obj["spec"]["poolRef"]["name"] not in pool_names:
            fail(where, f"the InferenceObjective {obj['metadata']['name']} names a pool not here")
    for route in by_kind(objects, "HTTPRoute"):
        for rule in route["spec"]["rules"]:
            for ref in rule["backendRefs"]:
                if ref.get("kind") == "InferencePool" and ref["name"] not in pool_names:
                    fail(where, f"the HTTPRoute sends to an InferencePool {ref['name']} not here")
    for cm in by_kind(objects, "ConfigMap"):
        if "config.yaml" in cm.get("data", {}) and "EndpointPickerConfig" in cm["data"]["config.yaml"]:
            cfg = yaml.safe_load(cm["data"]["config.yaml"])
            validate_schema(f"{where} EndpointPickerConfig", EPP_CONFIG_SCHEMA, cfg)
            names = {p.get("name", p["type"]) for p in cfg["plugins"]}
            for prof in cfg["schedulingProfiles"]:
                for ref in prof["plugins"]:
                    if ref["pluginRef"] not in names:
                        fail(where, f"scheduling profile uses undeclared plugin {ref['pluginRef']}")


def adapter_rules(objects):
    for cm in by_kind(objects, "ConfigMap"):
        if cm["metadata"]["name"].startswith("prometheus-adapter"):
            cfg = yaml.safe_load(cm["data"]["config.yaml"])
            validate_schema("prometheus-adapter config", ADAPTER_SCHEMA, cfg)
            return cfg["rules"]
    return []


# ------------------------------------------------------------ metric names

def exported_metrics():
    """The names server/metrics.c renders (first string of each table row, or
    the name handed to put_labelled / put_header)."""
    with open("server/metrics.c") as f:
        src = f.read()
    names = set(re.findall(r'\{"([a-z_0-9]+)",', src))
    names |= set(re.findall(r'put_labelled\(f, in, "([a-z_0-9]+)"', src))
    names |= set(re.findall(r'put_header\(f, in->prefix, "([a-z_0-9]+)"', src))
    return names


def check_metric_names(where, text, exported, recorded):
    for name in set(re.findall(r"vllm:([a-zA-Z_0-9]+)", text)):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in exported and base not in exported:
            fail(where, f"vllm:{name} is not a metric tram exports")
    for name in set(re.findall(r"\b((?:job|pod|cpi):[a-zA-Z_0-9:]+)", text)):
        if name not in recorded:
            fail(where, f"{name} is no recording rule of deploy/prometheus")


def main():
    serve_help = subprocess.run([os.environ.get("TRAM_BIN", "bin/tram"), "serve", "--help"],
                                capture_output=True, text=True, check=True).stdout
    with open("server/router.c") as f:
        routes = set(re.findall(r'\.path = "([^"]+)"', f.read()))
    exported = exported_metrics()
    with open(os.path.join(ROOT, "prometheus/tram-rules.yaml")) as f:
        rules_text = f.read()
    recorded = {r["record"] for g in yaml.safe_load(rules_text)["groups"]
                for r in g["rules"] if "record" in r}
    check_metric_names("deploy/prometheus/tram-rules.yaml", rules_text, exported, recorded)
    with open(os.path.join(ROOT, "grafana/tram-dashboard.json")) as f:
        dashboard = json.load(f)
    ids = [p["id"] for p in dashboard["panels"]]
    if len(ids) != len(set(ids)) or not ids:
        fail("dashboard", "panel ids must be unique")
    exprs = "\n".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    check_metric_names("deploy/grafana/tram-dashboard.json", exprs, exported, recorded)
    kdir = os.path.join(ROOT, "kubernetes")
    overlays = sorted(d for d in os.listdir(kdir)
                      if os.path.isfile(os.path.join(kdir, d, "kustomization.yaml")))
    for overlay in overlays:
        where = f"deploy/kubernetes/{overlay}"
        before = len(failures)
        objects = load_kustomization(os.path.join(kdir, overlay))
        for path, obj in objects:
            validate_object(path, obj)
        if len(failures) > before:
            continue
        d, labels, ports = check_tram_pods(where, objects, serve_help, routes) or (None,) * 3
        rules = adapter_rules(objects)
        check_scalers(where, objects, d, {r["name"]["as"] for r in rules})
        check_inference_pool(where, objects, labels, ports)
        check_lora(where, objects)
        text = yaml.safe_dump_all([o for _, o in objects])
        check_metric_names(where, text, exported, recorded)
        print(f"{where}: {len(objects)} objects checked")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
