"""Loading problems: KernelBench files, user files with a class name, JSONL; clear errors."""

import textwrap

import pytest

from drtriton.problem import ProblemError, from_source, load_file, load_kernelbench, load_problems

USER_FILE = textwrap.dedent('''
    import math
    import torch
    import torch.nn as nn
    import matplotlib.pyplot as plt  # unused by the module: must not be needed to build it

    HIDDEN = 32

    def scaled(x, s):
        return x * s

    class Base(nn.Module):
        pass

    class Block(Base):
        def __init__(self, width):
            super().__init__()
            self.lin = nn.Linear(width, HIDDEN)
        def forward(self, x):
            return scaled(self.lin(x), math.sqrt(2))

    class Other(nn.Module):
        def forward(self, x):
            return x

    def get_inputs():
        return [torch.rand(4, 16)]

    def get_init_inputs():
        return [16]

    model = Block(16)
    for _ in range(3):
        print("training")

    if __name__ == "__main__":
        raise SystemExit("never run")
''')


def test_user_file_with_class_keeps_what_the_class_needs_and_drops_scripts():
    p = from_source(USER_FILE, "Block", origin="user.py")
    assert p.class_name == "Block" and p.candidate_class == "BlockTriton"
    for needed in ("import math", "HIDDEN = 32", "def scaled", "class Base", "class Block", "def get_inputs"):
        assert needed in p.source
    for dropped in ("matplotlib", "class Other", "print(", "__main__", "model = Block"):
        assert dropped not in p.source
    namespace = {}
    exec(compile(p.source, "problem", "exec"), namespace)  # the extract runs on its own
    out = namespace["Block"](*namespace["get_init_inputs"]())(*namespace["get_inputs"]())
    assert tuple(out.shape) == (4, 32)


def test_several_classes_need_a_name():
    with pytest.raises(ProblemError, match="several nn.Module classes.*--class"):
        from_source(USER_FILE)


def test_unknown_class_lists_the_ones_there():
    with pytest.raises(ProblemError, match="no nn.Module subclass named 'Nope'.*Block"):
        from_source(USER_FILE, "Nope")


def test_missing_inputs_say_what_to_add():
    src = "import torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x, mask):\n        return x\n"
    with pytest.raises(ProblemError) as e:
        from_source(src, "M")
    msg = str(e.value)
    assert "def get_inputs():" in msg and "M.forward(x, mask)" in msg and "def get_init_inputs():" in msg


def test_missing_init_inputs_with_required_constructor_args():
    src = ("import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, a, b=2):\n"
           "        super().__init__()\n    def forward(self, x):\n        return x\n"
           "def get_inputs():\n    return [torch.rand(2)]\n")
    with pytest.raises(ProblemError, match=r"__init__ needs arguments \(a\).*get_init_inputs"):
        from_source(src, "M")


def test_no_init_inputs_needed_for_a_plain_constructor():
    src = "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        return x\ndef get_inputs():\n    return [torch.rand(2)]\n"
    assert from_source(src, "M").init_inputs_fn is None


def test_class_specific_inputs_win():
    src = USER_FILE + "\ndef get_inputs_Other():\n    return [torch.rand(3)]\n"
    assert from_source(src, "Other").inputs_fn == "get_inputs_Other"
    assert from_source(src, "Block").inputs_fn == "get_inputs"


def test_syntax_error_names_the_line():
    with pytest.raises(ProblemError, match="f.py:2: syntax error"):
        from_source("x = 1\ndef (:\n", origin="f.py")


def test_unreadable_file(tmp_path):
    with pytest.raises(ProblemError, match="cannot read"):
        load_file(tmp_path / "missing.py")


def test_kernelbench_file_and_folder(tmp_path):
    (tmp_path / "19_ReLU.py").write_text(
        "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\ndef get_inputs():\n    return [torch.rand(4)]\n"
        "def get_init_inputs():\n    return []\n")
    p = load_file(tmp_path / "19_ReLU.py")
    assert p.name == "19_ReLU" and p.is_kernelbench and p.candidate_class == "ModelNew"
    assert [q.name for q in load_problems(tmp_path)] == ["19_ReLU"]


def test_kernelbench_jsonl(kernelbench_dir):
    problems = load_kernelbench(kernelbench_dir / "level2.jsonl")
    assert len(problems) == 100
    assert all(p.class_name == "Model" for p in problems)
    assert problems[0].meta == {"level": 2, "problem_id": 1}
    assert problems[0].origin == "kernelbench:level2/1"
    assert len({p.key for p in problems}) == 100


def test_bad_jsonl_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"name": "x"}\n')
    with pytest.raises(ProblemError, match="bad.jsonl:1: not a KernelBench row"):
        load_kernelbench(f)


def test_an_import_that_registers_the_operators_forward_calls_is_kept():
    # transformers' grouped_mm_fallback exists once its module is imported; forward calls it as
    # torch.ops.transformers.<op>, never reading the imported name. Unrelated imports still go.
    src = textwrap.dedent('''
        import torch
        import torch.nn as nn
        import transformers.integrations.moe
        from transformers.integrations import moe as unused
        import json


        class M(nn.Module):
            def forward(self, x, w, ends):
                return torch.ops.transformers.grouped_mm_fallback(x, w, ends)


        def get_inputs():
            return []
    ''')
    kept = from_source(src).source
    assert "import transformers.integrations.moe" in kept and "moe as unused" in kept
    assert "import json" not in kept
