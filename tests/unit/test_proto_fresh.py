"""The checked-in gRPC code must match proto/ (regenerate with scripts/gen_proto.py)."""

import subprocess
import sys

from tests.support import ROOT


def test_generated_code_is_fresh():
    result = subprocess.run(
        [sys.executable, "scripts/gen_proto.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_notices_a_stale_file(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_proto
    finally:
        sys.path.pop(0)
    for name, text in gen_proto.generate().items():
        (tmp_path / name).write_text(text)
    (tmp_path / "worker_pb2.py").write_text("# edited by hand\n")
    monkeypatch.setattr(gen_proto, "OUT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["gen_proto.py", "--check"])
    assert gen_proto.main() == 1
