from __future__ import annotations

import re

import libcst as cst

from torchdev_lint import fixes
from torchdev_lint.analysis import guards, kinds, portability, provenance, requirements, run_order
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.tree import collect, walk
from torchdev_lint.analysis.sites import LOADER_CALL
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

# The examples' training code: it saves weights from the device it is given.
_EXPORT = "import torch\ndef export(model, device, out):\n    torch.save(model.to(device).state_dict(), out)\n"


class LoadWithoutMapLocation(Rule):
    """
    ## What it does
    Flags `torch.load(...)` and `torch.jit.load(...)` calls that do not pass `map_location`
    (as a keyword or as the second positional argument), whatever name torch is imported
    under: `import torch as T`, `from torch import load`, `from torch import jit`.

    It does not flag calls that pass `map_location` (even `None`, an explicit choice),
    calls with `*args`/`**kwargs` that may carry it, a project's own function or method
    named `load`, or `safetensors` loaders (they take `device=` and default to the CPU).

    Nor loads of files that cannot come from another machine: a file the same function
    (or, for a load at the top level of a script, the script's top-level code) wrote
    earlier with `torch.save`/`.save` (a round trip in one process: the tensors come back
    to the devices they left; not when it saves only if the file is missing, as in
    `if not os.path.exists(path): torch.save(...)`, since the file loaded may then have been
    written elsewhere), a file a test wrote itself (the test saves, trains or
    writes under `tmp_path`/`tmpdir`/`tempfile` before loading, hands the path to a
    helper of the test code that loads it, or takes the path from a pytest fixture of the
    same file that writes it: fixtures of a `conftest.py` are not seen), and pickles the file
    name, the key read or the variable says hold metadata only (`meta.pt`,
    `["hyper_parameters"]`, `vocab = torch.load(...)`). Checkpoints from outside (a path
    argument, a download cache, a config value) are flagged, in tests too.

    Nor bytes the program sent itself from tensors it moved to the CPU:
    `torch.load(io.BytesIO(extra["metrics_bytes"]))` where another function of the same
    file returns `{"metrics_bytes": buffer.getvalue()}` after `torch.save(metrics, buffer)`
    of `.cpu()` tensors (a worker's results sent to the main process).

    Nor a file the loading class writes itself from data it fetched, as torchvision's old
    MNIST did: another method (`download()`) `torch.save`s, at the very path loaded (to it
    or into `with open(path, "wb") as f`), tensors it built from what it read (not from its
    parameters; `self` only in the arguments of calls that build something new, such as
    `os.path.join(self.root, ...)` or `urlopen(self.url)`), in a file that never names a
    device. Not in an `nn.Module`: its owner may have moved the state it saves.

    Nor a pickle of one NumPy array: a load whose result only ever goes into
    `torch.from_numpy`, whole or sliced (`data = torch.load("traindata.pt")` then
    `torch.from_numpy(data[3:, :-1])`). `from_numpy` accepts nothing but a numeric NumPy
    array, and a slice of a list or dict is no array, so wherever the program works the
    file holds no tensor to map. One entry of a container (`torch.from_numpy(table[n])`)
    is flagged: its other entries may be tensors, and `torch.load` restores them all.

    Nor a file that the project's own CPU code writes (its preprocessing): when every
    `torch.save` in the project that writes a file of the loaded name (`f"{manifest}.f0_stat.pt"`
    and `f"{out}.f0_stat.pt"` both name `{}.f0_stat.pt`) is in code that never names a device
    (no `cuda`, `device`, `.to(`, `mps`, `xpu`, accelerator or Lightning): the saving module,
    the project functions it calls by import, every module that imports it (its callers may
    hand it the data), and no load without `map_location` in them but of such files. This
    needs the project index (a run over the project, or its package): a file linted alone,
    or a name spelled only by variables (`f"{name}.pt"`), is flagged. Not seen: a
    library that moves data to a GPU by itself, or a file of that name from elsewhere.

    Nor loads in test code that only runs where an accelerator is (a decorator such as
    `@require_torch_accelerator` or `@RunIf(min_cuda_gpus=1)` on the test or its class,
    or a guard): such a test runs in one process on the project's own GPU machines, where a
    fixture saved on the CPU and one saved on a GPU both load. What is left is narrow: a
    fixture saved on CUDA read by a runner with another accelerator (MPS, XPU), or saved
    on a GPU index the runner lacks. Code other than tests under a guard is still flagged,
    as possible only (see Confidence): there, every process of a multi-GPU job loads the
    checkpoint onto GPU 0.

    ## Why is this bad?
    Without `map_location`, every tensor is restored to the device it was saved from. A
    checkpoint written on `cuda:0` fails to load on a machine without a GPU
    (`RuntimeError: Attempting to deserialize object on a CUDA device but
    torch.cuda.is_available() is False`), and on a multi-GPU machine every process loads
    it onto GPU 0, which runs out of memory.

    ## Fix
    Adds `map_location=<device>` with a device expression already bound at that point
    (`device`, `self.device`, `args.device`...), or `map_location="cpu"` where none is at
    hand.

    Fix safety: safe when the loaded object (or one entry of it, `torch.load(f)["model"]`)
    goes straight into `load_state_dict(...)`, which copies the values onto the module's own
    devices wherever they were loaded.
    Unsafe otherwise: tensors used directly now land on the chosen device instead of the
    one they were saved from.

    ## Confidence
    Certain when the whole failure path is shown ([confidence](../confidence.md)): the load
    runs on a machine without CUDA that the code is meant for (declared by `target-devices`,
    or shown as for [TDL001](TDL001.md); for library code, a package that shows a CPU path,
    used by code that runs and not only by users that run on CUDA), the file holds tensors
    (the object goes into `load_state_dict` or another loading function, is read under a
    checkpoint key such as `["state_dict"]`, or is used as a module), and those tensors can
    be on an accelerator: the project saves weights with `torch.save` from code that places
    tensors on devices, without moving them to the CPU first. A script with `--cpu` loading
    `torch.load(args.weights)` in a project whose training saves from the GPU is the shape:
    its checkpoints, published ones included, fail to load on a laptop.

    A checkpoint the repository ships settles the last step by itself: when the code spells
    the whole path (`torch.load("weights/net.pth")`, a name bound once to it, a parameter's
    literal default or the literal a missing path falls back to) and that file is in the repository (from the loading file's folder up
    to the project's root), its records say where its tensors were saved. A file saved on
    `cuda:0` makes the load certain wherever the code runs without CUDA, whatever the object
    is used for (restoring the file needs that device); one saved on the CPU makes it
    possible (it loads anywhere), whatever the project's savers suggest. The file is read
    without torch and without running it (its pickles are read with classes that build
    nothing); a Git LFS pointer or a plain pickle says nothing.

    Possible where a step is missing or the file may come back to the machine that wrote it:
    code judged CUDA-only; a file of plain objects or a scheduler's state; a load that only
    runs where CUDA is wanted or present, or in code that needs CUDA anyway (a CUDA-only
    library, a `torch.cuda.*Tensor` type or a raising `torch.cuda` call on its path, or one
    that every run reaching the load makes first, in a caller in any file); a round
    trip (the same script, class or notebook writes a file of that name: the same variable,
    literal, name template or file handle opened on the same path; or every run that reaches
    the load has saved a checkpoint first, whatever the file is named: a torch save of a
    model or its weights earlier in the loading function, or earlier in each of its callers
    however deep and in whichever file, itself or through a function or an object called
    there that saves: `main()` trains and then tests; an early-stopping object saves the best
    model, then `train()` reloads it; `torch.load(train(...))`. A caller that does not pass
    the optional path the load runs under, as `create_model()` without `model_path`, does not
    reach it; a save in one branch of an `if` does not precede the other, and a loop's later
    save does not precede its first pass); a file at an absolute path of
    one machine (`/dshome/lab/runs/model.pth`: the code runs where that file is, unless the
    repository ships it under the path's tail); a resume of the script's own checkpoint or a
    trainer's start point (code that writes checkpoints in a loop); a file of unknown origin
    (a name the code spells, as a literal, a parameter's default or the literal a missing path
    falls back to, that the project never writes, a file the code fetches from
    elsewhere such as a download, published weights of PyTorch's model zoo (torch.hub's
    cache, a `model_urls` table: saved as CPU tensors), a name the code does not spell in a project that saves
    weights both as CPU tensors and from a device, a project that saves its weights as
    CPU tensors or never from code on a device, or one that ships what its savers write,
    named as they name it, holding CPU tensors only: the code that saved it ran on the
    CPU); weights going into a module moved
    to CUDA anyway; library code that no running code imports or whose users all run on
    CUDA; test code.

    Not seen: a file of the loaded name that the project writes in another run (an inference
    script loading what its training script saves stays certain: that is how GPU-trained
    checkpoints get published); a file the project writes from the GPU that is never
    published or copied to another machine.

        ## When not to use
    When checkpoints are always produced and consumed on identical single-GPU machines.
    """

    code = "TDL004"
    name = "load-without-map-location"
    sites = frozenset({LOADER_CALL})
    message = "`torch.load` without `map_location`: tensors go back to the device they were saved from"
    fix_title = "Pass `map_location`"

    VALID = [
        # the dataset's own download() wrote the file from fetched data, on the CPU
        Valid("import os\nimport pickle\nimport torch\nclass Digits:\n"
              "    def __init__(self, root):\n        self.root = root\n"
              "        self.images = torch.load(os.path.join(self.root, 'digits.pt'))\n"
              "    def download(self):\n        with open(os.path.join(self.root, 'raw.pkl'), 'rb') as f:\n"
              "            arrays = pickle.load(f)\n"
              "        with open(os.path.join(self.root, 'digits.pt'), 'wb') as f:\n"
              "            torch.save(torch.ByteTensor(arrays), f)\n"),
        Valid("import torch\nstate = torch.load('ckpt.pt', map_location='cpu')\n"),
        Valid("import torch\nstate = torch.load('ckpt.pt', None)\n"),
        Valid("import torch\nstate = torch.load(path, map_location=None)\n"),
        Valid("import torch\nstate = torch.load(path, **load_kwargs)\n"),
        Valid("import json\ndata = json.load(f)\n"),
        Valid("from .checkpoint import load\nstate = load('ckpt.pt')\n"),
        Valid("def load(p):\n    return p\nstate = load('ckpt.pt')\n"),
        Valid("from safetensors.torch import load_file\nstate = load_file('m.safetensors')\n"),
        Valid("import torch\nclass Saver:\n    def go(self):\n        return self.load('x')\n"),
        # A round trip in one function: saved and loaded by the same process.
        Valid("import io\nimport torch\ndef clone(obj):\n    buffer = io.BytesIO()\n"
              "    torch.save(obj, buffer)\n    buffer.seek(0)\n    return torch.load(buffer)\n"),
        # A script reloading the best model it saved while training: the same process.
        Valid("import torch\nfor epoch in range(3):\n    with open(args.save, 'wb') as f:\n"
              "        torch.save(model, f)\nwith open(args.save, 'rb') as f:\n"
              "    model = torch.load(f)\n"),
        # A test that wrote the file itself.
        Valid("import torch\ndef test_resume(tmp_path):\n"
              "    ckpt = torch.load(tmp_path / 'last.ckpt', weights_only=True)\n", "test_resume.py"),
        Valid("import torch\ndef test_hparams(trainer, model):\n    trainer.fit(model)\n"
              "    ckpt = torch.load(trainer.checkpoint_callback.best_model_path)\n", "test_hparams.py"),
        # Metadata, and the name says so.
        Valid("import torch\ndef read(d):\n    metadata = torch.load(d / 'meta.pt')\n"
              "    return metadata['world_size']\n"),
        Valid("import torch\ndef hp(path):\n"
              "    return torch.load(path)['hyper_parameters']\n"),
        # A test that only runs where an accelerator is.
        Valid("import torch\n@require_torch_accelerator\ndef test_pipeline(pipe):\n"
              "    embeds = torch.load(hf_hub_download('org/slices', 'embeds.pt'))\n", "test_pipeline.py"),
        # A worker's results, moved to the CPU, sent to the main process as bytes.
        Valid("import io\nimport torch\ndef results(trainer):\n"
              "    metrics = {k: v.cpu() for k, v in trainer.metrics.items()}\n"
              "    buffer = io.BytesIO()\n    torch.save(metrics, buffer)\n"
              "    return {'metrics_bytes': buffer.getvalue()}\n"
              "def update(extra):\n    return torch.load(io.BytesIO(extra['metrics_bytes']))\n"),
        # A NumPy array: `torch.from_numpy` takes nothing else, so the pickle holds no tensor.
        Valid("import torch\ndata = torch.load('traindata.pt')\n"
              "inputs = torch.from_numpy(data[3:, :-1])\ntargets = torch.from_numpy(data[3:, 1:])\n"),
    ]
    INVALID = [
        Invalid(  # certain: the caller chooses the device, the file holds weights, and the
            # project saves weights from a device: its checkpoints can hold GPU tensors
            _EXPORT + "def restore(model, path, device):\n    model.load_state_dict(torch.load(path))\n",
            5, 27,
            _EXPORT + "def restore(model, path, device):\n"
            "    model.load_state_dict(torch.load(path, map_location=device))\n",
        ),
        Invalid(  # one entry of the checkpoint goes straight into load_state_dict: a safe fix too
            _EXPORT + "def restore(model, path, device):\n    model.load_state_dict(torch.load(path)['model'])\n",
            5, 27,
            _EXPORT + "def restore(model, path, device):\n"
            "    model.load_state_dict(torch.load(path, map_location=device)['model'])\n",
        ),
        Invalid(  # possible: nothing in sight saves weights from a device; whose file is it?
            "import torch\ndef restore(model, path, device):\n    model.load_state_dict(torch.load(path))\n",
            3, 27,
            "import torch\ndef restore(model, path, device):\n"
            "    model.load_state_dict(torch.load(path, map_location=device))\n", possible=True,
        ),
        Invalid(  # possible: a file the project never writes (a release, a download)
            _EXPORT + "def backbone(model, device, path='pretrained/resnet50.pth'):\n"
            "    model.load_state_dict(torch.load(path))\n",
            5, 27,
            _EXPORT + "def backbone(model, device, path='pretrained/resnet50.pth'):\n"
            "    model.load_state_dict(torch.load(path, map_location=device))\n", possible=True,
        ),
        Invalid(  # possible: the file a missing path falls back to is a release too
            _EXPORT + "def backbone(model, device, path=None):\n    if not path:\n"
            "        path = 'zoo/swin_tiny_22k.pth'\n    model.load_state_dict(torch.load(path)['model'])\n",
            7, 27,
            _EXPORT + "def backbone(model, device, path=None):\n    if not path:\n"
            "        path = 'zoo/swin_tiny_22k.pth'\n"
            "    model.load_state_dict(torch.load(path, map_location=device)['model'])\n", possible=True,
        ),
        Invalid(  # possible: a trainer's start point, read where it trains
            "import torch\ndef train(model, args, device):\n    model.load_state_dict(torch.load(args.init))\n"
            "    for epoch in range(args.epochs):\n        torch.save(model.to(device).state_dict(), args.out)\n",
            3, 27,
            "import torch\ndef train(model, args, device):\n"
            "    model.load_state_dict(torch.load(args.init, map_location=device))\n"
            "    for epoch in range(args.epochs):\n        torch.save(model.to(device).state_dict(), args.out)\n",
            possible=True,
        ),
        Invalid(  # possible: the module the weights go into goes to CUDA anyway
            _EXPORT + "def restore(model, path, device):\n    model.load_state_dict(torch.load(path))\n"
            "    model.cuda()\n",
            5, 27,
            _EXPORT + "def restore(model, path, device):\n"
            "    model.load_state_dict(torch.load(path, map_location=device))\n    model.cuda()\n",
            possible=True,
        ),
        Invalid(  # the same dataset saving tensors its caller gave it: they may be on any device
            "import os\nimport torch\nclass Digits:\n"
            "    def __init__(self, root):\n        self.root = root\n"
            "        self.images = torch.load(os.path.join(self.root, 'digits.pt'))\n"
            "    def store(self, images):\n"
            "        with open(os.path.join(self.root, 'digits.pt'), 'wb') as f:\n"
            "            torch.save(images, f)\n",
            6, 23,
            "import os\nimport torch\nclass Digits:\n"
            "    def __init__(self, root):\n        self.root = root\n"
            "        self.images = torch.load(os.path.join(self.root, 'digits.pt'), map_location=\"cpu\")\n"
            "    def store(self, images):\n"
            "        with open(os.path.join(self.root, 'digits.pt'), 'wb') as f:\n"
            "            torch.save(images, f)\n",
            unsafe=True, possible=True,
        ),
        Invalid(  # saved only when missing: the file may come from elsewhere (argv, an earlier run)
            "import os\nimport torch\nif not os.path.exists(path):\n    torch.save(model.state_dict(), path)\n"
            "state = torch.load(path)\n",
            5, 9,
            "import os\nimport torch\nif not os.path.exists(path):\n    torch.save(model.state_dict(), path)\n"
            "state = torch.load(path, map_location=\"cpu\")\n",
            unsafe=True, possible=True,
        ),
        Invalid(  # only where CUDA is: no CPU machine runs it, but every process of a multi-GPU job loads onto GPU 0
            "import torch\ndef restore(model, path, device):\n    if torch.cuda.is_available():\n"
            "        state = torch.load(path)\n    else:\n"
            "        state = torch.load(path, map_location='cpu')\n"
            "    model.load_state_dict(state)\n",
            4, 17,
            "import torch\ndef restore(model, path, device):\n    if torch.cuda.is_available():\n"
            "        state = torch.load(path, map_location=device)\n    else:\n"
            "        state = torch.load(path, map_location='cpu')\n"
            "    model.load_state_dict(state)\n",
            unsafe=True, possible=True,
        ),
        Invalid(  # bytes of tensors not moved to the CPU
            "import io\nimport torch\ndef results(metrics):\n    buffer = io.BytesIO()\n"
            "    torch.save(metrics, buffer)\n    return {'metrics_bytes': buffer.getvalue()}\n"
            "def update(extra):\n    return torch.load(io.BytesIO(extra['metrics_bytes']))\n",
            8, 12,
            "import io\nimport torch\ndef results(metrics):\n    buffer = io.BytesIO()\n"
            "    torch.save(metrics, buffer)\n    return {'metrics_bytes': buffer.getvalue()}\n"
            "def update(extra):\n    return torch.load(io.BytesIO(extra['metrics_bytes']), map_location=\"cpu\")\n",
            unsafe=True, possible=True,
        ),
        Invalid(  # one entry of a container into from_numpy: the others may be tensors
            "import torch\ndef bounds(path, n):\n    table = torch.load(path)\n"
            "    return torch.from_numpy(table[n])\n",
            3, 13,
            "import torch\ndef bounds(path, n):\n    table = torch.load(path, map_location=\"cpu\")\n"
            "    return torch.from_numpy(table[n])\n",
            unsafe=True, possible=True,
        ),
        Invalid(  # a checkpoint from outside, in a test: not written by it
            "import torch\ndef test_legacy(path_ckpt):\n"
            "    state = torch.load(path_ckpt, weights_only=False)\n",
            3, 13,
            "import torch\ndef test_legacy(path_ckpt):\n"
            "    state = torch.load(path_ckpt, weights_only=False, map_location=\"cpu\")\n",
            unsafe=True, possible=True,
        ),
        Invalid(  # saved elsewhere: another file than the one loaded
            "import torch\ndef run(model, args):\n    torch.save(model, args.out)\n"
            "    model.load_state_dict(torch.load(args.resume))\n",
            4, 27,
            "import torch\ndef run(model, args):\n    torch.save(model, args.out)\n"
            "    model.load_state_dict(torch.load(args.resume, map_location=\"cpu\"))\n", possible=True,
        ),
        Invalid(
            "import torch\nmodel.load_state_dict(torch.load('ckpt.pt'))\n",
            2, 23,
            "import torch\nmodel.load_state_dict(torch.load('ckpt.pt', map_location=\"cpu\"))\n", possible=True,
        ),
        Invalid(
            "import torch as T\nstate = T.load(\n    path,\n)\n",
            2, 9,
            'import torch as T\nstate = T.load(\n    path,\n    map_location="cpu",\n)\n',
            unsafe=True, possible=True,
        ),
        Invalid(
            "from torch import load as L\ndevice = 'cpu'\nstate = L(path)\n",
            3, 9,
            "from torch import load as L\ndevice = 'cpu'\nstate = L(path, map_location=device)\n",
            unsafe=True, possible=True,
        ),
        Invalid(
            "from torch import jit\nscripted = jit.load('model.pt')\n",
            2, 12,
            "from torch import jit\nscripted = jit.load('model.pt', map_location=\"cpu\")\n",
            unsafe=True, possible=True,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        # The word itself (`torch.load`, `from torch import load as L`, `L = torch.load`), not
        # `download` or `load_state_dict`: half of diffusers' files name those and no loader.
        return "torch" in source and _LOAD_WORD.search(source) is not None

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.candidates: list[tuple[cst.Call, tuple[cst.CSTNode, ...]]] = []
        self.saves: list[cst.Call] = []
        self.opened: dict[int, cst.BaseExpression] = {}  # a save's or load's handle -> its path
        self.checkpoint_writer: cst.Call | None = None  # any call that saves or checkpoints

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualified_name(node.func)
        if qualified in kinds.TORCH_SAVERS:
            self.saves.append(node)
            self._note_handle(node, provenance.saved_file(node))
        if self.checkpoint_writer is None and any(w in code_of(node.func).lower() for w in ("save", "checkpoint")):
            self.checkpoint_writer = node
        if qualified not in kinds.TORCH_LOADERS:
            return
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if len(positional) >= 2 or any(a.star for a in node.args):
            return
        if any(a.keyword is not None and a.keyword.value == "map_location" for a in node.args):
            return
        ancestors = tuple(self.ctx.ancestors)
        if (
            provenance.written_here(self.ctx, node)
            or provenance.says_metadata(ancestors, node)
            or provenance.retried_with_map_location(self.ctx, ancestors)
            or provenance.in_accelerator_test(self.ctx, ancestors)
            or provenance.sent_from_cpu(self.ctx, node)
            or provenance.only_arrays(self.ctx, node)
            or provenance.saved_by_cpu_code(self.ctx, node)
            or provenance.written_by_own_class(self.ctx, node)
        ):
            return
        self.candidates.append((node, ancestors))
        self._note_handle(node, provenance.loaded_file(node))

    def _note_handle(self, call: cst.Call, handle: cst.BaseExpression | None) -> None:
        path = provenance.opened_path(reversed(self.ctx.ancestors), handle)
        if path is not None:
            self.opened[id(call)] = path

    def end_of_file(self) -> None:
        for node, ancestors in self.candidates:
            verdict = portability.runs_without_cuda(self.ctx, ancestors, library=True)
            if verdict.off:
                continue
            steps, sure = list(verdict.steps), True  # sure: the rest of the path holds
            weights = _weights_use(ancestors, node)
            shipped = provenance.shipped_checkpoint(self.ctx, ancestors, node)
            on_devices = [where for where in shipped[1] if where != "cpu"] if shipped is not None else []
            if on_devices:
                # the file's own records: restoring them needs that device, whatever the tensors are for
                steps.append((node, f"the repository ships `{shipped[0]}`, whose tensors were saved on "
                                    f"{', '.join(on_devices)}: loading it without a map_location needs that device"))
            elif shipped is not None:
                sure = False
                steps.append((node, f"the repository ships `{shipped[0]}`, whose tensors were all saved on the CPU: "
                                    "it loads anywhere"))
            if weights is None:
                sure = sure and bool(on_devices)  # a file of plain objects or arrays holds no device
            else:
                steps.append(weights)
                origin = provenance.weights_saved_from_a_device(self.ctx)
                if shipped is None and origin is not None \
                        and provenance.fetched_here(self.ctx, ancestors, node) is None \
                        and provenance.shipped_saves_on_cpu(self.ctx) is None:
                    steps.append((node, f"the project saves weights from code that places tensors on devices "
                                        f"({origin}): its checkpoints can hold accelerator tensors"))
            save = next((s for s in self.saves if provenance.same_file_named(s, node, self.opened)), None)
            if save is None and self.ctx.path.endswith(".ipynb"):
                save = self.checkpoint_writer  # a notebook is one session: it reads what it wrote
            if save is not None:
                sure = False  # it may read back what it wrote, on the machine that wrote it
                steps.append((save, "the same file writes a file of that name: this may read it back"))
            for step in self._doubts(node, ancestors, weights, written_here=save is not None,
                                     known=shipped is not None):
                sure = False
                steps.append(step)
            self.report(node, fix=lambda node=node, ancestors=ancestors: self._fix(node, ancestors),
                        evidence=steps, certain=verdict.certain and sure,
                        set_aside=verdict.unknown_intent and sure)

    def _doubts(self, node: cst.Call, ancestors: tuple[cst.CSTNode, ...], weights, written_here: bool,
                known: bool):
        """What makes a load of tensors that can run without CUDA still uncertain: doubts of
        where the file comes from (``_origin_doubts``; not when ``known``: the repository ships
        it, and what it holds was read), the code around it needs CUDA anyway, it reads back
        what a helper saved earlier in the same run, or it is a trainer's start point.
        ``written_here``: the file itself writes a file of that name."""
        ctx = self.ctx
        if not known:
            yield from self._origin_doubts(node, ancestors, weights, written_here)
        if guards.is_guarded(ancestors, ctx.qualified_name):
            yield (node, "it only runs where CUDA is wanted or present (a guard, as TDL001's): no CPU-only "
                         "machine runs it, though every process of a multi-GPU job loads it onto GPU 0")
        step = portability.needs_cuda_around(ctx, ancestors)
        if step is None and requirements.of_file(ctx, ancestors[0]).only_on_accelerator(ancestors):
            step = (node, "the code around it needs CUDA anyway (a CUDA-only library, a raising `torch.cuda` "
                          "call, a collective of NCCL process groups)")
        if step is None:
            step = portability.cuda_first_in_every_run(ctx, ancestors, node, run_order.LOAD)
        if step is not None:
            yield step
        receiver = _receiver(weights)
        step = portability.moved_to_cuda_anyway(ancestors, receiver) if receiver is not None else None
        if step is not None:
            yield step
        earlier = provenance.saved_earlier_in_every_run(ctx, ancestors, node)
        if earlier is not None:
            yield (node, f"every run that gets here has saved a checkpoint first ({earlier}): this reads back "
                         "what that run wrote, on the machine that wrote it")
        handed = provenance.handed_the_savers_path(ctx, ancestors, node)
        if handed is not None:
            yield (node, f"{handed}: this reads back what that run wrote, on the machine that wrote it")
        writer = provenance.written_by_another_method(ctx, ancestors, node)
        if writer is not None:
            yield (writer, "another method of the same class writes a file of that name: the object may "
                           "read back what it wrote, on the machine that wrote it")
        script = self.saves and not portability.is_library_module(ctx, ancestors[0])
        option = provenance.resumes_option(ctx, ancestors, node) if script else None
        if option is not None:
            yield (option, f"the file saves its own checkpoints and `{code_of(option)}` resumes one: "
                           "normally on the machine that wrote it")
        trainer = provenance.saves_in_a_loop(ctx, ancestors)
        if trainer is not None:
            yield (trainer, "the code that loads it saves checkpoints in a loop: a trainer's start point (its "
                            "resume, a model to fine-tune), read where it trains")

    def _origin_doubts(self, node: cst.Call, ancestors: tuple[cst.CSTNode, ...], weights, written_here: bool):
        """Nothing shows the file can hold accelerator tensors: the project never saves weights
        from code on a device, never writes a file of that name, or saves CPU tensors; the file
        is downloaded, or published by the model zoo."""
        ctx = self.ctx
        if weights is not None and not written_here and provenance.weights_saved_from_a_device(ctx) is None:
            yield (node, "nothing in the project saves weights from code that places tensors on devices: "
                         "the file comes from elsewhere, saved on a device the code does not show")
        shipped = provenance.shipped_saves_on_cpu(ctx) if weights is not None and not written_here else None
        if shipped is not None:
            yield (node, f"the repository ships what the project's savers write ({shipped}), and it holds CPU "
                         "tensors only: the code that saved it ran on the CPU")
        into = weights[0] if weights is not None and not written_here else None
        if isinstance(into, cst.Call) and isinstance(into.func, cst.Attribute):
            whole = provenance.saved_whole_around(ctx, into.func.value)
            if whole is not None:
                yield (into, f"the weights go into `{code_of(into.func.value)}`, a part of the model the project "
                             f"saves whole ({whole}): those checkpoints keep it under "
                             f"`{into.func.value.attr.value}.`, so this file is the part's own, from elsewhere")
        fetched = provenance.fetched_here(ctx, ancestors, node)
        if fetched is not None:
            yield (fetched, "the file is fetched here by code that is no torch save (a download): its tensors "
                            "are on whatever device its publisher saved them from, which the code does not show")
        zoo = provenance.from_model_zoo(ctx, ancestors, node)
        if zoo is not None:
            yield (zoo, "the file is published weights from PyTorch's model zoo (torch.hub's cache or file names, a "
                        "`model_urls` table): they are saved as CPU tensors")
        cpu_save = provenance.cpu_weights_somewhere(ctx) if weights is not None else None
        if cpu_save is not None and provenance.loaded_name(ctx, ancestors, node) is None:
            yield (node, f"the project also saves weights as CPU tensors ({cpu_save}) and the code does not spell "
                         "this file's name: which save wrote it is not shown")
        machine = provenance.machine_path(ctx, ancestors, node)
        if machine is not None:
            yield (node, f"the file is at `{machine}`, a place on one machine's disk: the code runs there, with "
                         "the files that machine wrote")
        foreign = None if written_here else provenance.never_written(ctx, ancestors, node)
        if foreign is not None:
            yield (node, f"no code of the project writes a file named `{foreign}`: it comes from elsewhere "
                         "(a release, a download), saved on a device the code does not show")
        where = ctx.index.cpu_weights() if ctx.index is not None else None
        if where is not None:
            yield (node, f"the project saves its weights as CPU tensors ({where} moves them to the CPU "
                         "first): its checkpoints load anywhere")

    def _fix(self, node: cst.Call, ancestors: tuple[cst.CSTNode, ...]) -> Fix:
        choice, _ = fixes.device_for(self.ctx, ancestors, node)
        device = fixes.expression(choice.code if choice.existing else '"cpu"')
        applicability = (
            Applicability.SAFE if _state_dict_call(ancestors) is not None else Applicability.UNSAFE
        )
        return Fix(
            applicability,
            [(node, lambda updated: fixes.add_keyword(updated, "map_location", device))],
        )


_LOAD_WORD = re.compile(r"\bload\b")
# Keys under which checkpoints keep weights.
# Methods of a dict that read its entries.
_DICT_READS = frozenset({"items", "keys", "values", "get", "copy", "pop"})
_WEIGHT_KEYS = frozenset({"state_dict", "model", "model_state_dict", "params", "params_ema", "net",
                          "weights", "module", "ema", "optimizer", "generator", "discriminator"})
# Methods only a whole pickled module has.
_MODULE_METHODS = frozenset({"eval", "train", "parameters", "state_dict", "to", "cuda", "half"})


def _weights_use(ancestors, node: cst.Call) -> tuple[cst.CSTNode, str] | None:
    """Where the loaded object shows it holds tensors: it goes into ``load_state_dict``
    (directly, or through the name it is bound to in the same function), is read under a
    checkpoint key (``ckpt["state_dict"]``, not an entry read as an object:
    ``data["params"].recThrs``), used as a module (``net.eval()``, ``net(x)``) or
    handed, after the load, to a function that loads it (not a ``DataLoader``, which batches
    data). A file of plain objects or arrays, or a learning-rate
    scheduler's state, holds no device."""
    loader = _state_dict_call(ancestors)
    if loader is not None and not _schedules(loader.func.value):
        return loader, "the loaded tensors are weights: they go into load_state_dict"
    parent = ancestors[-2] if len(ancestors) > 1 else None  # ancestors end with the call itself
    grandparent = ancestors[-3] if len(ancestors) > 2 else None
    # `ckpt["state_dict"].items()` reads the state dict's entries; `data["params"].recThrs` an object's
    read_as_object = isinstance(grandparent, cst.Attribute) and grandparent.value is parent \
        and grandparent.attr.value not in _DICT_READS
    key = _weight_key(parent) if isinstance(parent, cst.Subscript) and parent.value is node \
        and not read_as_object else None
    if key is not None:
        return parent, f"the loaded object holds weights under {key}"
    if not (isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)):
        return None
    name = parent.targets[0].target.value
    scope = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), ancestors[0])
    found: list[tuple[cst.CSTNode, str]] = []
    # `data["params"].recThrs`: an entry read as an object (COCOeval's parameters), no state dict
    # (`ckpt["model"].to(device)` is a pickled module at work: weights)
    objects = {id(a.value) for a in collect(scope, cst.Attribute)
               if isinstance(a.value, cst.Subscript) and a.attr.value not in _MODULE_METHODS}

    def reads(expr: cst.CSTNode) -> bool:
        hit = False

        def enter(child: cst.CSTNode) -> bool:
            nonlocal hit
            hit = hit or (isinstance(child, cst.Name) and child.value == name)
            return not hit

        walk(expr, enter)
        return hit

    after = False  # only what comes after the load uses it: `np.load(data)` before reads a path

    def enter(child: cst.CSTNode) -> bool:
        nonlocal after
        if found:
            return False
        if child is node:
            after = True
            return False
        if not after:
            return True
        if isinstance(child, cst.Call) and isinstance(child.func, cst.Attribute):
            method, receiver = child.func.attr.value, child.func.value
            if (_loads_into(method) and any(reads(a.value) for a in child.args)
                    and not _schedules(receiver)):
                found.append((child, f"the loaded tensors are weights: they go into `{method}`"))
            elif method in _MODULE_METHODS and isinstance(receiver, cst.Name) and receiver.value == name:
                found.append((child, f"the loaded object is a module: `{name}.{method}()`"))
        if isinstance(child, cst.Call) and isinstance(child.func, cst.Name):
            if child.func.value == name:
                found.append((child, "the loaded object is a module: it is called"))
            elif _loads_into(child.func.value) and any(reads(a.value) for a in child.args):
                found.append((child, f"the loaded tensors are weights: they go into `{child.func.value}`"))
        if isinstance(child, cst.Subscript) and isinstance(child.value, cst.Name) and child.value.value == name \
                and id(child) not in objects:
            key = _weight_key(child)
            if key is not None:
                found.append((child, f"the loaded object holds weights under {key}"))
        return True

    walk(scope, enter)
    return found[0] if found else None


def _loads_into(name: str) -> bool:
    """A call named for loading what it is handed (``load_weights``, ``net.load``), not a
    data loader (``DataLoader(data)`` batches a dataset: no weights)."""
    lowered = name.lower()
    return "load" in lowered and "loader" not in lowered


def _receiver(weights: tuple[cst.CSTNode, str] | None) -> str | None:
    """The code of the module the loaded weights go into (``model`` of
    ``model.load_state_dict(...)``, a loaded module used as one), or None."""
    node = weights[0] if weights is not None else None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return code_of(node.func.value)
    return None


def _schedules(receiver: cst.BaseExpression) -> bool:
    """A learning-rate scheduler or a gradient scaler: its state is plain numbers, no tensors."""
    text = code_of(receiver).lower()
    return "sched" in text or "scaler" in text


def _weight_key(subscript: cst.Subscript) -> str | None:
    """``["state_dict"]``: the key, quoted, when it is one checkpoints keep weights under."""
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    key = subscript.slice[0].slice.value
    if isinstance(key, cst.SimpleString) and key.evaluated_value in _WEIGHT_KEYS:
        return key.value
    return None


def _state_dict_call(ancestors) -> cst.Call | None:
    """The ``m.load_state_dict(...)`` call that the load's result goes straight into:
    ``m.load_state_dict(torch.load(...))``, or one entry of it, ``m.load_state_dict(
    torch.load(...)["model"])`` (the rest of the loaded object is dropped at once)."""
    inner = len(ancestors) - 2
    if inner >= 1 and isinstance(ancestors[inner], cst.Subscript) and ancestors[inner].value is ancestors[-1]:
        inner -= 1
    if inner < 1:
        return None
    outer, arg = ancestors[inner - 1], ancestors[inner]
    if (isinstance(outer, cst.Call) and isinstance(arg, cst.Arg) and isinstance(outer.func, cst.Attribute)
            and outer.func.attr.value == "load_state_dict"):
        return outer
    return None