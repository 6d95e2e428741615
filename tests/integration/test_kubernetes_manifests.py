"""deploy/kubernetes renders, validates against the Kubernetes schemas and keeps its promises.

No kustomize binary and no cluster: the tree uses only the part of kustomize that
`render()` below implements (resources, components, namespace, images; no patches), and
`render()` refuses any other kustomization key, so what is validated here is what
`kubectl apply -k` applies. Every object of every rendering is validated with
kubernetes-validate against the strict schemas (an unknown field is an error) of K8S_VERSION.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from bench.openai_server import VLLM_VERSION

ROOT = Path(__file__).resolve().parents[2]
KUBE_DIR = ROOT / "deploy" / "kubernetes"
BASE = KUBE_DIR / "base"
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
README = ROOT / "README.md"

# The Kubernetes release whose OpenAPI schemas the manifests must satisfy.
K8S_VERSION = "1.33.0"
NAMESPACE = "populace"
KUSTOMIZATION_KEYS = {"apiVersion", "kind", "resources", "components", "namespace", "images"}
KINDS = {
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
    "Component": "kustomize.config.k8s.io/v1alpha1",
}
CLUSTER_SCOPED = {"Namespace"}
WORKLOADS = {"Deployment", "DaemonSet", "StatefulSet"}
POPULACE_IMAGES = {"populace-manager", "populace-worker", "populace-llm"}
SECRET_NAME = re.compile(r"TOKEN|PASSWORD|SECRET|_KEY$|DATABASE_URL", re.IGNORECASE)
VAR_REF = re.compile(r"\$\((\w+)\)")
SECRET_FLAG = re.compile(r"--[\w-]*(token|password|secret|key)(-file)?(=|$)", re.IGNORECASE)


@dataclass
class Doc:
    obj: dict
    source: Path

    @property
    def id(self) -> tuple[str, str]:
        return self.obj["kind"], self.obj["metadata"]["name"]


# --- a renderer for the subset of kustomize the tree uses --------------------------------------


def kustomization_file(directory: Path) -> Path:
    return directory / "kustomization.yaml"


def load_kustomization(directory: Path) -> dict:
    path = kustomization_file(directory)
    assert path.is_file(), f"{directory} has no kustomization.yaml"
    data = yaml.safe_load(path.read_text())
    unknown = set(data) - KUSTOMIZATION_KEYS
    assert not unknown, f"{path}: keys the test renderer does not implement: {sorted(unknown)}"
    assert data.get("kind") in KINDS, f"{path}: kind {data.get('kind')!r}"
    assert data["apiVersion"] == KINDS[data["kind"]], path
    return data


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """name, tag, digest of an image reference."""
    image, _, digest = image.partition("@")
    name, tag = image, None
    if ":" in image.rsplit("/", 1)[-1]:
        name, tag = image.rsplit(":", 1)
    return name, tag, digest or None


def pod_spec(obj: dict) -> dict | None:
    if obj["kind"] in WORKLOADS:
        return obj["spec"]["template"]["spec"]
    return None


def containers(obj: dict) -> list[dict]:
    spec = pod_spec(obj)
    if spec is None:
        return []
    return [*spec.get("initContainers", []), *spec["containers"]]


def apply_images(docs: list[Doc], images: list[dict]) -> None:
    for entry in images:
        assert set(entry) <= {"name", "newName", "newTag", "digest"}, entry
        for doc in docs:
            for container in containers(doc.obj):
                name, tag, digest = split_image(container["image"])
                if name != entry["name"]:
                    continue
                name = entry.get("newName", name)
                tag = entry.get("newTag", tag)
                digest = entry.get("digest", digest)
                container["image"] = (
                    name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
                )


def render(directory: Path, extra_components: tuple[Path, ...] = ()) -> list[Doc]:
    """The objects `kustomize build directory` produces (for the subset above)."""
    kustomization = load_kustomization(directory)
    docs: list[Doc] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        assert path.exists(), f"{kustomization_file(directory)} lists {entry}, which is missing"
        if path.is_dir():
            assert load_kustomization(path)["kind"] == "Kustomization", path
            docs.extend(render(path))
        else:
            docs.extend(
                Doc(obj, path) for obj in yaml.safe_load_all(path.read_text()) if obj is not None
            )
    for entry in [*kustomization.get("components", []), *extra_components]:
        path = (directory / entry).resolve()
        assert path.is_dir(), f"{kustomization_file(directory)} lists {entry}, which is missing"
        assert load_kustomization(path)["kind"] == "Component", path
        component = render(path)
        docs.extend(component)
    # This kustomization's transformers act on everything accumulated above, as kustomize's do.
    if "namespace" in kustomization:
        for doc in docs:
            if doc.obj["kind"] not in CLUSTER_SCOPED:
                doc.obj["metadata"]["namespace"] = kustomization["namespace"]
    apply_images(docs, kustomization.get("images", []))
    return docs


def all_kustomization_dirs() -> list[Path]:
    return sorted(path.parent for path in KUBE_DIR.rglob("kustomization.yaml"))


def rendering_roots() -> dict[str, tuple[Path, tuple[Path, ...]]]:
    """Every deployable kustomization, plus the base with every component at once (so a
    component that no overlay uses, like ingress, is rendered and checked too)."""
    roots = {
        str(path.relative_to(KUBE_DIR)): (path, ())
        for path in all_kustomization_dirs()
        if load_kustomization(path)["kind"] == "Kustomization"
    }
    components = tuple(
        path for path in all_kustomization_dirs() if load_kustomization(path)["kind"] == "Component"
    )
    roots["base+all-components"] = (BASE, components)
    return roots


ROOTS = rendering_roots()


@pytest.fixture(scope="module")
def renderings() -> dict[str, list[Doc]]:
    return {name: render(path, extra) for name, (path, extra) in ROOTS.items()}


def find(docs: list[Doc], kind: str, name: str) -> dict:
    matches = [doc.obj for doc in docs if doc.id == (kind, name)]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} objects"
    return matches[0]


def env_of(container: dict) -> dict[str, dict]:
    return {item["name"]: item for item in container.get("env", [])}


def argv_of(container: dict) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def flag(argv: list[str], name: str) -> str:
    assert argv.count(name) == 1, f"{name} in {argv}"
    return argv[argv.index(name) + 1]


def secret_ref(item: dict) -> dict | None:
    return (item.get("valueFrom") or {}).get("secretKeyRef")


def field_ref(item: dict) -> str | None:
    return ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")


def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


# --- the tree -----------------------------------------------------------------------------------


def test_the_expected_renderings_exist() -> None:
    assert {"base", "overlays/trial", "overlays/gpu"} <= set(ROOTS), sorted(ROOTS)


def test_every_listed_file_exists_and_every_yaml_file_is_listed() -> None:
    listed: set[Path] = set()
    for directory in all_kustomization_dirs():
        kustomization = load_kustomization(directory)
        for entry in [*kustomization.get("resources", []), *kustomization.get("components", [])]:
            path = (directory / entry).resolve()
            assert path.exists(), f"{kustomization_file(directory)} lists missing {entry}"
            assert KUBE_DIR.resolve() in path.parents, f"{entry} is outside deploy/kubernetes"
            # kustomize refuses to load an ancestor of the kustomization (a cycle).
            assert path not in directory.resolve().parents, f"{entry} is an ancestor"
            if path.is_file():
                assert path.parent == directory.resolve(), f"{entry}: a file outside its root"
            listed.add(path)
    yaml_files = {
        path.resolve()
        for pattern in ("*.yaml", "*.yml")
        for path in KUBE_DIR.rglob(pattern)
        if path.name != "kustomization.yaml"
    }
    assert yaml_files, "no manifests"
    unlisted = sorted(str(p.relative_to(KUBE_DIR.resolve())) for p in yaml_files - listed)
    assert not unlisted, f"YAML files no kustomization lists: {unlisted}"


@pytest.mark.parametrize("name", sorted(ROOTS))
def test_every_object_is_valid_kubernetes(renderings: dict[str, list[Doc]], name: str) -> None:
    docs = renderings[name]
    assert docs
    errors = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc.obj, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = "/".join(str(p) for p in error.path)
            errors.append(f"{doc.source.name} {doc.id}: {path}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            errors.append(f"{doc.source.name} {doc.id}: {error.message}")
    assert not errors, "\n".join(errors)


def test_the_validator_is_strict() -> None:
    """A misspelt field fails: the check above cannot pass by accident."""
    worker = find(render(BASE), "DaemonSet", "worker")
    kubernetes_validate.validate(worker, K8S_VERSION, strict=True)
    broken = copy.deepcopy(worker)
    container = broken["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


@pytest.mark.parametrize("name", sorted(ROOTS))
def test_objects_are_unique_and_in_the_namespace(
    renderings: dict[str, list[Doc]], name: str
) -> None:
    ids = [doc.id for doc in renderings[name]]
    assert len(ids) == len(set(ids)), f"duplicate objects: {ids}"
    for doc in renderings[name]:
        if doc.obj["kind"] == "Namespace":
            assert doc.obj["metadata"]["name"] == NAMESPACE
        else:
            assert doc.obj["metadata"].get("namespace") == NAMESPACE, doc.id


@pytest.mark.parametrize("name", sorted(ROOTS))
def test_selectors_ports_and_references_match(renderings: dict[str, list[Doc]], name: str) -> None:
    docs = renderings[name]
    workloads = [doc.obj for doc in docs if doc.obj["kind"] in WORKLOADS]
    claims = {
        doc.obj["metadata"]["name"] for doc in docs if doc.obj["kind"] == "PersistentVolumeClaim"
    }
    services = {}
    for obj in workloads:
        labels = obj["spec"]["template"]["metadata"]["labels"]
        assert obj["spec"]["selector"]["matchLabels"].items() <= labels.items(), obj["kind"]
        spec = pod_spec(obj)
        declared = {volume["name"] for volume in spec.get("volumes", [])}
        declared |= {t["metadata"]["name"] for t in obj["spec"].get("volumeClaimTemplates", [])}
        for volume in spec.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims, volume
        for container in containers(obj):
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in declared, (obj["metadata"]["name"], mount)
    for doc in docs:
        if doc.obj["kind"] != "Service":
            continue
        service = doc.obj
        services[service["metadata"]["name"]] = service
        selector = service["spec"]["selector"]
        backends = [
            w
            for w in workloads
            if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(backends) == 1, f"Service {service['metadata']['name']} selects {len(backends)}"
        ports = {
            p.get("name"): p["containerPort"] for c in containers(backends[0]) for p in c["ports"]
        }
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            assert target in ports or target in ports.values(), (service["metadata"]["name"], port)
    for doc in docs:
        if doc.obj["kind"] != "Ingress":
            continue
        for rule in doc.obj["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                service = services[backend["name"]]
                assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}


# --- secrets ------------------------------------------------------------------------------------


def test_no_secret_values_in_any_manifest(renderings: dict[str, list[Doc]]) -> None:
    for name, docs in renderings.items():
        for doc in docs:
            assert doc.obj["kind"] not in {"Secret", "ConfigMap"}, (name, doc.id)
            for container in containers(doc.obj):
                for item in container.get("env", []):
                    if SECRET_NAME.search(item["name"]):
                        ref = secret_ref(item)
                        assert ref and "value" not in item, f"{doc.id} {item['name']} is inline"
                    value = str(item.get("value", ""))
                    assert not re.search(r"://[^/@\s]*:[^/@\s]*@", value), (doc.id, item)
                    assert container.get("envFrom") is None, "name each secret key explicitly"
                # A command line is visible to every user of the node: no secret flag, and no
                # secret-holding variable expanded into the arguments.
                for arg in argv_of(container):
                    assert not SECRET_FLAG.match(arg), (doc.id, arg)
                    for var in VAR_REF.findall(arg):
                        assert not secret_ref(env_of(container).get(var, {})), (doc.id, arg)
    for path in KUBE_DIR.rglob("*.y*ml"):
        text = path.read_text()
        assert not re.search(r"://[^/@\s]*:[^/@\s<]+@", text), f"{path}: a URL with a password"
        assert not re.search(r"^\s*(stringData|data):", text, re.MULTILINE), path


def test_the_readme_creates_every_required_secret(renderings: dict[str, list[Doc]]) -> None:
    required: dict[str, set[str]] = {}
    for docs in renderings.values():
        for doc in docs:
            for container in containers(doc.obj):
                for item in container.get("env", []):
                    ref = secret_ref(item)
                    if ref and not ref.get("optional"):
                        required.setdefault(ref["name"], set()).add(ref["key"])
    assert set(required) == {"populace-manager", "populace-worker", "populace-postgres"}
    readme = README.read_text()
    for secret, keys in required.items():
        match = re.search(
            rf"kubectl [^\n]*create secret generic {secret}\b(?:[^\n]*\\\n)*[^\n]*", readme
        )
        assert match, f"the README does not create the Secret {secret}"
        for key in keys:
            assert key in match.group(0), f"the README's {secret} lacks {key}"


def test_env_references_resolve(renderings: dict[str, list[Doc]]) -> None:
    for docs in renderings.values():
        for doc in docs:
            for container in containers(doc.obj):
                env = env_of(container)
                # The kubelet leaves an unknown $(VAR) as it is: the flag would get the literal.
                for arg in argv_of(container):
                    for var in VAR_REF.findall(arg):
                        assert var in env, f"{doc.id} {container['name']}: $({var}) undefined"
                for item in env.values():
                    resource = (item.get("valueFrom") or {}).get("resourceFieldRef")
                    if resource:
                        assert resource["containerName"] == container["name"], item
                        kind = resource["resource"].split(".", 1)
                        assert kind[1] in container["resources"][kind[0]], item


# --- the manager --------------------------------------------------------------------------------


def test_manager(renderings: dict[str, list[Doc]]) -> None:
    docs = renderings["base"]
    deployment = find(docs, "Deployment", "manager")
    assert deployment["spec"]["replicas"] == 1, "run state lives in the manager's process"
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    argv = argv_of(container)
    assert argv[:2] == ["populace", "manager"]
    assert flag(argv, "--host") == "0.0.0.0"
    port = int(flag(argv, "--port"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": port}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check = container[probe]["httpGet"]
        assert check["path"] == "/healthz" and check["port"] in ("http", port), probe

    env = env_of(container)
    for key in ("POPULACE_DATABASE_URL", "POPULACE_API_TOKEN", "POPULACE_JOIN_TOKEN"):
        assert secret_ref(env[key]) == {"name": "populace-manager", "key": key}
    # Workers' RPC secrets are sealed with a key from this Secret, or from the data volume.
    assert secret_ref(env["POPULACE_WORKER_SECRET_KEY"]) == {
        "name": "populace-manager",
        "key": "POPULACE_WORKER_SECRET_KEY",
        "optional": True,
    }
    data_dir = env["POPULACE_DATA_DIR"]["value"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == data_dir]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    claim = volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
    find(docs, "PersistentVolumeClaim", claim)

    service = find(docs, "Service", "manager")
    assert {p["port"] for p in service["spec"]["ports"]} == {port}
    for metadata in (service["metadata"], deployment["spec"]["template"]["metadata"]):
        annotations = metadata["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(port)
        assert annotations["prometheus.io/path"] == "/api/metrics"


def test_only_overlays_add_an_ingress_postgres_and_vllm(
    renderings: dict[str, list[Doc]],
) -> None:
    kinds = {doc.obj["kind"] for doc in renderings["base"]}
    assert "Ingress" not in kinds and "StatefulSet" not in kinds
    names = {doc.id[1] for doc in renderings["base"]}
    assert not names & {"postgres", "vllm"}
    assert "Ingress" in {doc.obj["kind"] for doc in renderings["base+all-components"]}


# --- the workers --------------------------------------------------------------------------------


def test_workers(renderings: dict[str, list[Doc]]) -> None:
    docs = renderings["base"]
    daemonset = find(docs, "DaemonSet", "worker")
    spec = daemonset["spec"]["template"]["spec"]
    assert not spec.get("hostNetwork"), "the pods are reached at their own IPs"
    (container,) = spec["containers"]
    argv = argv_of(container)
    env = env_of(container)
    assert argv[:2] == ["populace", "worker"]
    assert flag(argv, "--host") == "0.0.0.0"
    port = int(flag(argv, "--port"))
    assert port > 0, "a fixed port range, not free ports"

    # Stable identity: the node's name, so a restarted pod comes back as the same workers.
    (node_var,) = VAR_REF.fullmatch(flag(argv, "--node")).groups()
    assert field_ref(env[node_var]) == "spec.nodeName"
    (ip_var,) = VAR_REF.fullmatch(flag(argv, "--advertise-host")).groups()
    assert field_ref(env[ip_var]) == "status.podIP"
    (procs_var,) = VAR_REF.fullmatch(flag(argv, "--procs")).groups()
    resource = env[procs_var]["valueFrom"]["resourceFieldRef"]
    assert resource["resource"] == "limits.cpu" and resource["containerName"] == container["name"]
    assert str(resource.get("divisor", "1")) == "1"
    assert "cpu" in container["resources"]["limits"]

    # The manager's Service, at the port it serves on.
    manager = find(docs, "Service", "manager")
    assert flag(argv, "--manager") == f"http://manager:{manager['spec']['ports'][0]['port']}"

    # The join token arrives from a Secret through the environment, never on the command line.
    assert "--join-token" not in argv and "--join-token-file" not in argv
    assert secret_ref(env["POPULACE_JOIN_TOKEN"]) == {
        "name": "populace-worker",
        "key": "POPULACE_JOIN_TOKEN",
    }
    # Workers get nothing of the manager's: a node's kubelet can read the Secrets its pods use.
    refs = {secret_ref(item)["name"] for item in env.values() if secret_ref(item)}
    assert refs == {"populace-worker"}
    assert not {"POPULACE_DATABASE_URL", "POPULACE_API_TOKEN"} & set(env)
    assert env["POPULACE_LLM_ALLOWED_HOSTS"]["value"] == "llm:8081,vllm:8000"

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    readiness = container["readinessProbe"]
    probed = (readiness.get("grpc") or readiness.get("tcpSocket"))["port"]
    assert ports.get(probed, probed) == port, "the first gRPC process is probed"
    assert "livenessProbe" in container


def test_llm_keys_go_to_the_workers_only(renderings: dict[str, list[Doc]]) -> None:
    for docs in renderings.values():
        for doc in docs:
            for container in containers(doc.obj):
                if "OPENAI_API_KEY" in env_of(container):
                    assert doc.id == ("DaemonSet", "worker"), doc.id


# --- PostgreSQL for trials ----------------------------------------------------------------------


def test_trial_postgres(renderings: dict[str, list[Doc]]) -> None:
    docs = renderings["overlays/trial"]
    statefulset = find(docs, "StatefulSet", "postgres")
    assert statefulset["spec"]["replicas"] == 1
    (template,) = statefulset["spec"]["volumeClaimTemplates"]
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    assert template["metadata"]["name"] in {m["name"] for m in container["volumeMounts"]}
    assert container["image"] == compose()["services"]["postgres"]["image"]
    env = env_of(container)
    assert secret_ref(env["POSTGRES_PASSWORD"])["name"] == "populace-postgres"
    # The manager's URL names postgresql+asyncpg://populace:...@postgres:5432/populace.
    assert env["POSTGRES_USER"]["value"] == env["POSTGRES_DB"]["value"] == "populace"
    service = find(docs, "Service", "postgres")
    assert statefulset["spec"]["serviceName"] == "postgres"
    assert [p["port"] for p in service["spec"]["ports"]] == [5432]
    # Everything of the base is still there.
    assert {doc.id for doc in renderings["base"]} <= {doc.id for doc in docs}


# --- vLLM ---------------------------------------------------------------------------------------


def compose_argv(command: list[str]) -> list[str]:
    """The compose command with ${VAR:-default} at its defaults."""
    return [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(part)) for part in command]


def test_vllm_matches_docker_compose(renderings: dict[str, list[Doc]]) -> None:
    docs = renderings["overlays/gpu"]
    deployment = find(docs, "Deployment", "vllm")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    service = compose()["services"]["vllm"]
    assert container["image"] == service["image"] == f"vllm/vllm-openai:{VLLM_VERSION}"

    env = {name: item.get("value") for name, item in env_of(container).items()}
    argv = [VAR_REF.sub(lambda m: env[m.group(1)], arg) for arg in argv_of(container)]
    assert "command" not in container, "the image's entrypoint is the server, as with compose"
    assert argv == compose_argv(service["command"])
    assert env["HF_HUB_OFFLINE"] == service["environment"]["HF_HUB_OFFLINE"] == "1"

    resources = container["resources"]
    gpus = int(resources["limits"]["nvidia.com/gpu"])
    assert int(resources["requests"].get("nvidia.com/gpu", gpus)) == gpus
    assert int(flag(argv, "--tensor-parallel-size")) == gpus
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] == "/health", probe
    (models,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/models"]
    assert models.get("readOnly") is True

    vllm_service = find(docs, "Service", "vllm")
    assert [p["port"] for p in vllm_service["spec"]["ports"]] == [int(flag(argv, "--port"))]


# --- images, resources, probes, security --------------------------------------------------------


def dockerfile_uid() -> int:
    text = DOCKERFILE.read_text()
    assert "USER populace" in text
    return int(re.search(r"useradd [^\n]*--uid (\d+)[^\n]* populace\n", text).group(1))


def test_images(renderings: dict[str, list[Doc]]) -> None:
    compose_images = {
        split_image(service["image"])[0]
        for service in compose()["services"].values()
        if "build" in service
    }
    assert compose_images == POPULACE_IMAGES
    used = set()
    for docs in renderings.values():
        for doc in docs:
            for container in containers(doc.obj):
                name, tag, digest = split_image(container["image"])
                assert tag or digest, f"{container['image']}: no explicit tag"
                assert tag != "latest", container["image"]
                used.add(name)
    assert used >= POPULACE_IMAGES
    # Each image can be overridden through `images:`, and no entry names an unused image.
    for directory in all_kustomization_dirs():
        for entry in load_kustomization(directory).get("images", []):
            assert entry["name"] in used, f"{directory}: images entry {entry['name']} unused"
    base_entries = {e["name"] for e in load_kustomization(BASE)["images"]}
    assert base_entries == POPULACE_IMAGES


def test_every_container_has_resources_probes_and_a_security_context(
    renderings: dict[str, list[Doc]],
) -> None:
    uid = dockerfile_uid()
    for doc in renderings["base+all-components"]:
        spec = pod_spec(doc.obj)
        if spec is None:
            continue
        assert spec.get("automountServiceAccountToken") is False, doc.id
        pod_security = spec.get("securityContext", {})
        for container in containers(doc.obj):
            where = f"{doc.id} {container['name']}"
            for part in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(container["resources"].get(part, {})), where
            assert "readinessProbe" in container and "livenessProbe" in container, where
            security = {**pod_security, **container.get("securityContext", {})}
            assert security.get("allowPrivilegeEscalation") is False, where
            assert not security.get("privileged"), where
            if split_image(container["image"])[0] in POPULACE_IMAGES:
                assert security.get("runAsNonRoot") is True, where
                assert security.get("runAsUser") == uid, where
                assert security.get("readOnlyRootFilesystem") is True, where
                assert security["capabilities"]["drop"] == ["ALL"], where
