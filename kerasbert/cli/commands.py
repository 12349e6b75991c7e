"""What each ``kerasbert`` command does, once its arguments are parsed (:mod:`.main`).

Each ``command_*`` takes the ``argparse`` namespace, calls the library and prints the
result; it returns the exit code. Nothing here parses or checks flags beyond what the
library's own option checks do, and TensorFlow is imported only when a command runs.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from kerasbert.tasks import TASKS, options_class
from kerasbert.tasks.options import describe_defaults, options_from_arguments, users_of
from kerasbert.training.distribute import backend_refusal
from kerasbert.training.options import from_arguments, validate

if TYPE_CHECKING:
    import argparse


class UsageError(ValueError):
    """Bad command-line arguments; the message names the flag."""

    missing: list[str]  # argparse's: the required flags not given (set by the parser)


#: What runs on TensorFlow's backend only: refused by name on JAX and PyTorch, before any
#: work (docs/backends.md; tests/test_cli_backends.py). Every other command runs there, and
#: ``train`` each task on the backends its options' ``BACKENDS`` name.
TENSORFLOW_ONLY_COMMANDS = ("pretrain", "export")


def check_backend(command: str | None, args: argparse.Namespace) -> None:
    """Raises :class:`UsageError` naming ``KERAS_BACKEND`` when ``command`` (or its
    ``--task``, ``--strategy``) does not run on the Keras backend of this process."""
    if command not in ("train", *TENSORFLOW_ONLY_COMMANDS):
        return
    backend = configured_backend()
    if backend == "tensorflow":
        return
    where = f"KERAS_BACKEND={backend}"
    switch = "; set KERAS_BACKEND=tensorflow (the default) for it"
    if command in TENSORFLOW_ONLY_COMMANDS:
        raise UsageError(f"unsupported backend in {where}: kerasbert {command} runs on "
                         f"TensorFlow's backend only{switch}")
    task = getattr(args, "task", None) or TASKS[0]
    if backend not in options_class(task).BACKENDS:
        here = [name for name in TASKS if backend in options_class(name).BACKENDS]
        raise UsageError(f"unsupported backend in {where}: --task {task} runs on TensorFlow's "
                         f"backend only (on {backend}: --task {', '.join(here)}){switch}")
    refusal = backend_refusal(getattr(args, "strategy", None), backend)
    if refusal:
        raise UsageError(f"unsupported backend in {where}: {refusal}{switch}")


def configured_backend() -> str:
    """The Keras backend this process will run, as Keras finds it when imported
    (``KERAS_BACKEND``, else ``keras.json`` in ``KERAS_HOME`` or ``~/.keras``, else
    TensorFlow), read without importing Keras: a refused flag loads no TensorFlow."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json"), encoding="utf-8") as file:
            return json.load(file).get("backend", "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"


def _build(args: argparse.Namespace, **overrides: Any) -> Any:
    """The model ``audit`` and ``plot`` count and draw: weights with shapes, no values."""
    from kerasbert.models.build import build_transformer_model
    from kerasbert.models.deferred import shapes_only
    from kerasbert.models.heads import add_cls_classifier

    with shapes_only():
        built = build_transformer_model(
            args.config, model=args.model, with_pool=args.with_pool, with_nsp=args.with_nsp,
            with_mlm=args.with_mlm, with_discriminator=args.with_discriminator,
            return_keras_model=False, **overrides)
        if args.num_labels:
            built.model = add_cls_classifier(built.model, args.num_labels)
        if getattr(args, "lora", None):
            from kerasbert.models.lora import DEFAULT_TARGETS, enable_lora

            enable_lora(built.model, args.lora, args.lora_targets or DEFAULT_TARGETS)
    return built


def command_audit(args: argparse.Namespace) -> int:
    from kerasbert.models import audit

    if args.lora_targets and not args.lora:
        raise UsageError("invalid option in --lora-targets: only with --lora (the adapters' "
                         "rank)")
    built = _build(args)
    rows = audit.audit_model(built.model, built.config, args.with_pool, args.with_nsp,
                             args.with_mlm, args.num_labels, built.family,
                             args.with_discriminator, lora=args.lora,
                             lora_targets=args.lora_targets)
    total = built.model.count_params()
    report = audit.to_json(rows, total)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        audit.print_summary(built.model)
        print()
        print(audit.format_table(rows, total))
        print("\naudit:", "every count matches" if report["ok"] else "MISMATCH")
    return 0 if report["ok"] else 1


def command_plot(args: argparse.Namespace) -> int:
    from kerasbert.models import plot as plotting
    from kerasbert.training.rundir import check_writable

    check_writable(os.path.dirname(args.output) or ".", flag="--output")
    plotting.picture_format(args.output)  # before the model is built
    overrides = {"num_hidden_layers": args.layers} if args.layers else {}
    built = _build(args, **overrides)
    try:
        plotting.plot(built.model, args.output)
    except plotting.GraphvizMissing as error:
        print(f"kerasbert plot: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


def command_train(args: argparse.Namespace) -> int:
    """Parses, checks and resolves the flags once (:func:`~kerasbert.tasks.options.prepare`:
    a bad flag is refused before TensorFlow is imported, a preset is fetched in its own
    step), then trains on what they resolved to.

    Keras's progress output is a live bar on a terminal and one line per epoch in a log
    file or a pipe, where a bar's redraws would fill the file; there a line every minute
    (:class:`~kerasbert.training.callbacks.ProgressLines`) shows a long epoch at work.
    """
    from kerasbert.tasks import get_task
    from kerasbert.tasks.options import prepare

    options = prepare(options_from_arguments(args), flags=True)
    progress = _progress()
    from kerasbert.tasks.base import train_resolved
    from kerasbert.tasks.runs import describe_positions

    def say_checked() -> None:
        # Said once the inputs are checked: a refused run prints its one error line alone.
        for line in (describe_defaults(options), describe_positions(options)):
            if line:
                print(line, flush=True)

    summary = train_resolved(options, on_checked=say_checked, **progress)
    for line in get_task(options.task).train_report(options, summary):
        print(line)
    return 0


def _progress() -> dict[str, Any]:
    """``train``'s ``verbose`` and ``callbacks`` for this process's output."""
    if sys.stdout.isatty():
        return {"verbose": 1}
    from kerasbert.training.callbacks import ProgressLines

    return {"verbose": 2, "callbacks": [ProgressLines(PROGRESS_SECONDS)]}


#: The seconds between two progress lines of a run whose output is not a terminal.
PROGRESS_SECONDS = 60.0


def _columns(args: argparse.Namespace) -> dict[str, str]:
    """The column overrides of evaluate / predict (None: the run's own)."""
    return {name: getattr(args, name) for name in ("text_column", "pair_column", "label_column")
            if getattr(args, name, None) is not None}


def _open(args: argparse.Namespace) -> tuple[Any, Any]:
    """The run of ``--model`` and its task; column flags refused where its files have none."""
    from kerasbert.tasks import open_run, run_task

    task = run_task(args.model)
    if _columns(args) and not task.columns:
        raise UsageError(f"column in --text-column/--pair-column/--label-column: a "
                         f"{task.name} run reads {options_class(task.name).FILES} files, "
                         "which have no columns")
    return open_run(args.model, accept_changed=args.accept_changed), task


def command_evaluate(args: argparse.Namespace) -> int:
    run, task = _open(args)
    skipping = {}
    if args.skip_bad_rows:
        if task.name not in users_of("skip_bad_rows"):
            raise UsageError(f"invalid flag in --skip-bad-rows: a {task.name} run's evaluate "
                             f"reads every row (only {' and '.join(users_of('skip_bad_rows'))} "
                             "runs skip bad rows)")
        skipping = {"skip_bad_rows": True}
    metrics = run.evaluate(args.data, progress=True, **skipping, **_columns(args))
    lines = ([json.dumps(metrics, indent=2, ensure_ascii=False)] if args.json
             else task.evaluation_report(metrics))
    for line in lines:
        print(line)
    return 0


def command_predict(args: argparse.Namespace) -> int:
    if not args.input and not args.texts:
        raise UsageError("missing input in --input or TEXT: give texts, or a file")
    if args.input and args.texts:
        raise UsageError("too many inputs in --input and TEXT: give texts or a file, not both")
    if not args.input and _columns(args):
        raise UsageError("column without a file in --text-column/--pair-column/--label-column: "
                         "columns apply to --input")
    for number, text in enumerate(args.texts, start=1):
        if not text.strip():
            raise UsageError(f"empty text in TEXT {number}: nothing to predict")
        # Python keeps a byte of the command line that is not UTF-8 as U+DC80..U+DCFF.
        byte = next((ord(c) - 0xDC00 for c in text if 0xDC80 <= ord(c) <= 0xDCFF), None)
        if byte is not None:
            raise UsageError(f"invalid UTF-8 byte 0x{byte:02x} in TEXT {number}: texts must be "
                             "UTF-8 (is the terminal's encoding another?)")
    run, task = _open(args)
    try:
        task.check_texts(args.texts, run)
    except ValueError as error:
        raise UsageError(str(error)) from None
    rows = (run.predict(path=args.input, progress=True, **_columns(args)) if args.input
            else run.predict(texts=args.texts))
    for row in rows:
        print(json.dumps(row, ensure_ascii=False))
    return 0


def command_export(args: argparse.Namespace) -> int:
    from kerasbert.tasks import open_run

    options = {"version": args.version} if args.format == "saved_model" else {}
    if args.int8:
        if args.format != "onnx":
            raise UsageError(f"invalid flag in --int8: only with --format onnx, not "
                             f"--format {args.format}")
        options["int8"] = True
    if args.quantize and args.format != "saved_model":
        raise UsageError(f"invalid flag in --quantize: only with --format saved_model, not "
                         f"--format {args.format}" + (" (onnx: --int8)" if args.format == "onnx"
                                                      else ""))
    run = open_run(args.model, accept_changed=args.accept_changed)
    if args.quantize:
        from kerasbert.models.quantization import quantize

        quantize(run.model, args.quantize)
    for path in run.export(args.to, overwrite=args.overwrite, format=args.format, **options):
        print(f"wrote {path}")
    return 0


def command_pretrain(args: argparse.Namespace) -> int:
    from kerasbert.pretraining import mlm as pretrain  # the module

    options = from_arguments(pretrain.PretrainOptions, args)
    validate(options, flags=True)  # named as flags; pretrain's own check then passes
    summary = pretrain.pretrain(options, **_progress())
    print(f"\n{summary['steps']} steps, vocabulary {summary['vocab_size']}, "
          f"{summary['parameters']:,} parameters, {summary['wall_seconds']:.0f} s")
    if "dev" in summary:
        print(f"dev MLM accuracy {summary['dev']['accuracy']:.4f}, loss "
              f"{summary['dev']['loss']:.4f} ({summary['dev']['masked_tokens']} masked tokens)")
    print(f"wrote {options.output} (bert_model.ckpt, bert_config.json, vocab.txt, "
          "pretrain_metrics.json)")
    return 0


def command_convert(args: argparse.Namespace) -> int:
    from kerasbert.models.convert import convert_hf_to_google
    from kerasbert.training.rundir import check_export_target

    # Not into a run directory: its checkpoint is the run's own, even with --overwrite.
    check_export_target(os.path.dirname(args.to) or ".")
    done = convert_hf_to_google(args.from_hf, args.to, overwrite=args.overwrite)
    print(f"wrote {done.prefix} ({done.variables} variables) and {done.config_path}")
    print(f"wrote {done.vocab_path}" if done.vocab_path else f"no vocab.txt in {args.from_hf}")
    if done.skipped:
        print(f"left out (no Google name): {', '.join(done.skipped)}")
    return 0


def command_download(args: argparse.Namespace) -> int:
    from kerasbert.models.convert import download_preset

    print(download_preset(args.name, progress=not args.quiet))
    return 0


def command_presets(args: argparse.Namespace) -> int:
    from kerasbert.presets import table
    from kerasbert.presets.download import damage

    rows = [("name", "family", "size", "licence", "source", "cached")]
    for preset in table.load().values():
        cached = table.is_cached(preset.name)
        size = (_folder_mb(table.preset_dir(preset.name)) if cached else preset.size_mb)
        state = ("damaged (downloaded again on use)" if damage(preset.name) else "yes") \
            if cached else "no"
        # A loaded preset has a source: exactly one of zip and hf (table.load checks it).
        rows.append((preset.name, preset.family, f"{size:.0f} MB" if size else "-",  # type: ignore[arg-type]
                     preset.licence, preset.source, state))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return 0


def _folder_mb(folder: str) -> float:
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)) / 1e6
