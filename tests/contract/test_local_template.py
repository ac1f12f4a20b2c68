"""The local stack's SAM transform runs in a child process: the same template as the translator
makes in process, none of the translator left in the process that asked, and a template the
translator refuses is a clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from memory_hub_local import template


def test_the_child_gives_what_the_translator_gives_in_process():
    assert template.expanded("eu-west-1") == json.loads(json.dumps(template.transform_here("eu-west-1")))


def test_the_translator_is_never_imported_by_the_process_that_asks():
    script = (
        "import json, sys\n"
        "from memory_hub_local import template\n"
        "cfn = template.expanded('us-east-1')\n"
        "print(json.dumps([len(cfn['Resources']), sorted(m for m in sys.modules if m.startswith('samtranslator'))]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    resources, imported = json.loads(done.stdout)
    assert resources > 20 and imported == []


def test_a_template_the_translator_refuses_is_a_clear_error(tmp_path: Path):
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "Transform: AWS::Serverless-2016-10-31\n"
        "Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n      Handler: app.handler\n",
        encoding="utf-8",
    )
    with pytest.raises(RuntimeError, match=r"the SAM transform of broken\.yaml failed: .+"):
        template.expanded("us-east-1", broken)
