"""The ``kerasbert`` command line: its parser, its help and its one-line errors.

The tasks ``train`` takes, their flags, files and examples come from
:mod:`kerasbert.tasks` (each task's ``options.py``); this module names none of them.
"""

import argparse
import logging
import os
import re
import signal
import sys
import textwrap
import traceback
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, NoReturn

from kerasbert.cli import commands as handlers
from kerasbert.cli.commands import UsageError, check_backend
from kerasbert.models.families import FAMILIES
from kerasbert.models.names import LORA_TARGETS
from kerasbert.quiet import quiet_tensorflow
from kerasbert.tasks import TASKS, options_class
from kerasbert.tasks.options import add_task_arguments, users_of
from kerasbert.training.options import COUNT, RunOptions, add_arguments, argument_type

DESCRIPTION = """kerasbert: Chinese (and any Google) BERT on Keras 3, with bert4keras layer names.

{intro}

examples:
{examples}
  kerasbert audit chinese_L-12_H-768_A-12/bert_config.json --num-labels 2
  kerasbert presets                                  # well-known checkpoints by name
  kerasbert train --model chinese-base --train my.csv --dev dev.csv --output runs/x
  kerasbert <command> --help                         # the options of one command

A failure ends with exit code 2 and one line on stderr,
"kerasbert <command>: <what> in <file or flag>: <why>"; --debug (or KERASBERT_DEBUG=1)
adds the traceback, --verbose shows TensorFlow's start-up logging.
"""

COMMANDS = ("audit", "plot", "train", "pretrain", "evaluate", "predict", "export", "convert",
            "download", "presets")
FORMATS = ("saved_model", "onnx", "litert")
#: What ``export --quantize`` takes: Keras's modes that serve (float8 is for training in float8).
EXPORT_QUANTIZATION = ("int8", "int4")


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors raised (one line, from :func:`main`) instead of printed."""

    def error(self, message: str) -> NoReturn:
        error = UsageError(_usage_message(message, self.prog))
        required = re.fullmatch(r"the following arguments are required: (.+)", message)
        error.missing = required[1].split(", ") if required else []  # for _parse
        raise error


def _usage_message(message: str, prog: str) -> str:
    """argparse's error as ``<what> in <flag>: <why>``."""
    patterns = (
        (r"the following arguments are required: (.+)",
         lambda m: f"missing argument in {m[1]}: required (see {prog} --help)"),
        (r"unrecognized arguments: (.+)",
         lambda m: f"unknown argument in {m[1]}: not an argument of {prog} (see {prog} --help)"),
        (r"argument (\S+): invalid choice: (\S+) \(choose from (.+)\)",
         lambda m: f"invalid value {m[2]} in {m[1]}: choose from {m[3]}"),
        (r"argument (\S+): invalid (integer|number) value: (.+)",
         lambda m: f"invalid value {m[3]} in {m[1]}: not {'an' if m[2] == 'integer' else 'a'} "
                   f"{m[2]}"),
        (r"argument (\S+): invalid value (.+?): (.+)", lambda m: f"invalid value {m[2]} in {m[1]}: "
                                                             f"{m[3]}"),
        (r"argument (\S+): expected one argument",
         lambda m: f"missing value in {m[1]}: expected one (a value that starts with '-' is "
                   f"written {m[1]}=VALUE)"),
        (r"argument (\S+): (.+)", lambda m: f"invalid argument in {m[1]}: {m[2]}"),
    )
    for pattern, render in patterns:
        found = re.fullmatch(pattern, message)
        if found:
            return render(found)
    return f"invalid arguments in {prog}: {message}"


#: The argparse types of the flags no options class holds: the options' own rules.
_count, _path = argument_type(COUNT), argument_type()


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=_path,
                        help="bert_config.json (Google) or config.json (Hugging Face)")
    parser.add_argument("--num-labels", type=_count, default=None, metavar="N",
                        help="add the CLS-token classifier with N labels (default: none)")
    parser.add_argument("--with-pool", action="store_true", help="add Pooler/Pooler-Dense")
    parser.add_argument("--with-nsp", action="store_true", help="add the NSP head")
    parser.add_argument("--with-mlm", action="store_true", help="add the MLM head")
    parser.add_argument("--with-discriminator", action="store_true",
                        help="add ELECTRA's discriminator head (--model electra)")
    parser.add_argument("--model", choices=tuple(FAMILIES), default=None, metavar="FAMILY",
                        help="model family, as bert4keras names it: "
                             f"{', '.join(FAMILIES)} (default: the config's model_type, "
                             "ALBERT's for an ALBERT config, else bert)")


def _command(commands: Any, name: str, summary: str, examples: Sequence[str],
             run: Callable[[argparse.Namespace], int], description: str | None = None,
             options: type[RunOptions] | None = None) -> argparse.ArgumentParser:
    """A subcommand whose help says what it does and shows examples.

    Args:
        run: the ``command_*`` function that runs it.
        options: an options dataclass whose fields are the command's flags
            (:func:`kerasbert.training.options.add_arguments`).
    """
    description = description or summary[0].upper() + summary[1:] + "."
    parser = commands.add_parser(
        name, help=summary, description=textwrap.fill(description, 88),
        epilog="examples:\n" + "\n".join(f"  {line}" for line in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    if options is not None:
        add_arguments(parser, options)
    parser.set_defaults(run=run)
    return parser


def _run_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=_path, metavar="DIR",
                        help="run directory of kerasbert train (required)")
    parser.add_argument("--accept-changed", action="store_true",
                        help="use the run although one of its files (labels, tags, vocab, "
                             "model) changed since it finished (refused by default)")


def _column_arguments(parser: argparse.ArgumentParser) -> None:
    for name, what in (("text", "the text"), ("pair", "the second text of pairs"),
                       ("label", "the label")):
        parser.add_argument(f"--{name}-column", metavar="NAME",
                            help=f"column of {what} (default: the run's, from its "
                                 "train_config.json)")


def _examples(task: str, *commands: str) -> list[str]:
    """The command lines a task's options give as examples (``EXAMPLE``) for ``commands``
    (``"train"``, ``"predict"``)."""
    example = options_class(task).EXAMPLE
    lines = {"train": f"kerasbert train{'' if task == TASKS[0] else f' --task {task}'} --output "
                      f"{example['run']}",
             "predict": f"kerasbert predict --model {example['run']} {example['predict']}"}
    notes = {"train": example["train"]}
    return [f"{lines[command]:<50} # {notes[command]}" if command in notes else lines[command]
            for command in commands]


def _runs_with(field: str) -> str:
    """``"ner runs"``: the tasks whose options have ``field``, in words."""
    return " and ".join(users_of(field)) + " runs"


def _runs_in(export_format: str) -> str:
    """The tasks that export as ``export_format``, in words."""
    return " and ".join(name for name in TASKS
                        if export_format in options_class(name).FORMATS) + " runs"


def make_parser() -> argparse.ArgumentParser:
    tasks = {name: options_class(name) for name in TASKS}
    intro = ("Audit and draw a model from its bert_config.json; fine-tune it from a Google "
             "checkpoint (or the shipped small Chinese model) for a task ("
             + "; ".join(f"{name}: {kind.SUMMARY.split(';')[0]}" for name, kind in tasks.items())
             + "); evaluate a run, predict with it, export it for TF Serving, ONNX Runtime or "
             "LiteRT; pretrain a masked LM; convert Hugging Face weights to a Google checkpoint.")
    parser = _Parser(prog="kerasbert", description=DESCRIPTION.format(
                         intro=textwrap.fill(intro, 88),
                         examples="\n".join(f"  {line}" for name in TASKS
                                            for line in _examples(name, "train", "predict")[:2])),
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of a failure (also KERASBERT_DEBUG=1)")
    parser.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's start-up logging (hidden by default)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="<command>")

    config_example = "chinese_L-12_H-768_A-12/bert_config.json"
    audit = _command(
        commands, "audit", "print model.summary() and check every parameter count",
        [f"kerasbert audit {config_example} --num-labels 2",
         f"kerasbert audit {config_example} --with-pool --json"],
        description="Builds the model of a config, prints model.summary() with full layer "
                    "names, and checks each layer's parameter count against its family's formula "
                    "(BERT, ALBERT, NEZHA, RoFormer, RoFormer-v2, ELECTRA, GPT, GPT-2, GPT2-ML); "
                    "exit code 1 on a mismatch.", run=handlers.command_audit)
    _model_arguments(audit)
    audit.add_argument("--lora", type=_count, default=None, metavar="RANK",
                       help="with LoRA adapters of rank RANK, as kerasbert train --lora trains "
                            "them: each row's trainable and frozen parameters")
    audit.add_argument("--lora-targets", nargs="+", default=None, metavar="NAME",
                       choices=(*LORA_TARGETS, "all"),
                       help=f"with --lora: the projections given adapters, of "
                            f"{', '.join(LORA_TARGETS)}, or all (default: query value)")
    audit.add_argument("--json", action="store_true", help="print the audit as JSON")

    plot = _command(
        commands, "plot", "draw the model with keras.utils.plot_model (needs Graphviz)",
        [f"kerasbert plot {config_example} --num-labels 2 --layers 2 -o bert.png"],
        run=handlers.command_plot)
    _model_arguments(plot)
    plot.add_argument("-o", "--output", required=True, type=_path, metavar="FILE",
                      help="picture to write: .png, .svg or .pdf (required)")
    plot.add_argument("--layers", type=_count, default=None, metavar="N",
                      help="draw a model cut to N transformer layers, a readable picture "
                           "(default: all of the config's)")

    from kerasbert.training.options import PretrainOptions

    train = _command(
        commands, "train", f"fine-tune BERT for a task: {', '.join(TASKS)}",
        [*(line for name in TASKS for line in _examples(name, "train")),
         "kerasbert train --output runs/news --config chinese_L-12_H-768_A-12/bert_config.json \\",
         "    --checkpoint chinese_L-12_H-768_A-12/bert_model.ckpt \\",
         "    --train train.tsv --dev dev.tsv --test test.tsv --epochs 3",
         "kerasbert train --output runs/news --resume   # after an interruption"],
        description="Fine-tunes BERT for one task (--task) and writes a run directory: "
                    "model.keras (best dev epoch), the backbone as a Google checkpoint, "
                    "train_config.json and metrics.json. "
                    + " ".join(f"{name}: {kind.SUMMARY}." for name, kind in tasks.items())
                    + " A flag of another task is refused.",
        run=handlers.command_train)
    add_task_arguments(train)

    _command(
        commands, "pretrain", "masked-LM pretraining; writes a Google checkpoint",
        ["kerasbert pretrain --config bert_config.json --vocab vocab.txt \\",
         "    --corpus corpus.txt --output pretrained --steps 5000"],
        description="Pretrains a BERT with the masked-LM objective on a corpus, keeping only "
                    "the vocabulary tokens the corpus uses, and writes bert_model.ckpt, "
                    "bert_config.json and vocab.txt in Google's format.",
        run=handlers.command_pretrain, options=PretrainOptions)

    files = "; ".join(f"a {name} run: {kind.FILES}" for name, kind in tasks.items())
    evaluate = _command(
        commands, "evaluate", "metrics of a run's model on a labelled file",
        ["kerasbert evaluate --model runs/reviews --data test.tsv",
         "kerasbert evaluate --model runs/reviews --data other.csv --text-column review --json",
         "kerasbert evaluate --model runs/x --data test.txt   # in the format of the run's task"],
        description="Scores a run's model on a labelled file in its task's format, with the "
                    f"task's metrics ({files}).", run=handlers.command_evaluate)
    _run_argument(evaluate)
    evaluate.add_argument("--data", required=True, type=_path, metavar="FILE",
                          help="labelled file in the run's task's format (required)")
    _column_arguments(evaluate)
    evaluate.add_argument("--skip-bad-rows", action="store_true",
                          help="skip and count malformed rows and rows of labels the run does "
                               f"not know, instead of failing ({_runs_with('skip_bad_rows')})")
    evaluate.add_argument("--json", action="store_true", help="print the metrics as JSON")

    texts = "; ".join(f"a {name} run: {kind.TEXTS}" for name, kind in tasks.items())
    predict = _command(
        commands, "predict", "a run's predictions; one JSON line per example",
        ["kerasbert predict --model runs/reviews --input reviews.tsv > predictions.jsonl",
         "kerasbert predict --model runs/reviews --input texts.txt   # one text per line",
         *(line for name in TASKS for line in _examples(name, "predict"))],
        description="Runs a run's model on texts, or on a file in its task's format, and "
                    f"prints one JSON line per example ({texts}).",
        run=handlers.command_predict)
    _run_argument(predict)
    predict.add_argument("--input", type=_path, metavar="FILE",
                         help="a file in the run's task's format, or ("
                              + ", ".join(name for name, kind in tasks.items() if kind.TEXT_LINES)
                              + ") a .txt file of one text per line; or give TEXTs")
    _column_arguments(predict)
    predict.add_argument("texts", nargs="*", metavar="TEXT",
                         help=f"what to predict on: {texts}")

    export = _command(
        commands, "export", "write the model for serving: SavedModel, ONNX or LiteRT",
        ["kerasbert export --model runs/reviews --to serving/reviews   # writes serving/reviews/1/",
         "kerasbert export --model runs/reviews --to onnx/reviews --format onnx",
         "kerasbert export --model runs/reviews --to onnx/int8 --format onnx --int8"],
        description="Writes a run's model for serving. saved_model: TF Serving's layout "
                    "<to>/<version>/ with a signature that takes raw strings (the WordPiece "
                    "tokenizer runs in the graph: "
                    + ", ".join(f"'{kind.SIGNATURE}' for a {name} run"
                                for name, kind in tasks.items())
                    + ") and the int32 'serving_default'. "
                    f"onnx ({_runs_in('onnx')}): <to>/model.onnx with labels.json and "
                    f"vocab.txt. litert ({_runs_in('litert')}): <to>/model.tflite.",
        run=handlers.command_export)
    _run_argument(export)
    export.add_argument("--to", required=True, type=_path, metavar="DIR",
                        help="directory to write (required)")
    export.add_argument("--format", choices=FORMATS, default="saved_model",
                        help="what to write (default: saved_model)")
    export.add_argument("--version", type=_count, default=None, metavar="N",
                        help="saved_model version folder (default: one more than the highest "
                             "in --to, or 1)")
    export.add_argument("--overwrite", action="store_true",
                        help="replace an earlier export in --to (never anything else)")
    export.add_argument("--int8", action="store_true",
                        help="onnx only: int8 weights for every matrix product (ONNX Runtime's "
                             "dynamic quantization), the fastest way to run on a CPU")
    export.add_argument("--quantize", choices=EXPORT_QUANTIZATION, default=None,
                        help="saved_model only: Keras's quantization of every dense product "
                             "(int8: int8 weights, rows of inputs quantized as they come; int4: "
                             "two weights to a byte) (default: float weights)")

    convert = _command(
        commands, "convert", "write a Google checkpoint, bert_config.json and vocab.txt",
        ["kerasbert convert --from-hf all-MiniLM-L6-v2 --to minilm/bert_model.ckpt",
         "kerasbert convert --from-hf all-MiniLM-L6-v2 --to minilm/bert_model.ckpt --overwrite"],
        description="Converts a Hugging Face BERT, ALBERT, ELECTRA, RoFormer, GPT-2 or OpenAI "
                    "GPT (config.json, model.safetensors or tf_model.h5, vocab.txt) to a Google "
                    "checkpoint "
                    "that kerasbert, bert4keras and Google's code load. "
                    "An existing file of the output (the checkpoint's, or bert_config.json "
                    "and vocab.txt beside it) is replaced only with --overwrite; a run "
                    "directory's checkpoint never.",
        run=handlers.command_convert)
    convert.add_argument("--from-hf", required=True, type=_path, metavar="DIR",
                         help="Hugging Face model directory: config.json, model.safetensors (or "
                              "tf_model.h5), vocab.txt (required)")
    convert.add_argument("--to", required=True, type=_path, metavar="PREFIX",
                         help="checkpoint prefix to write, e.g. out/minilm/bert_model.ckpt "
                              "(required)")
    convert.add_argument("--overwrite", action="store_true",
                         help="replace an earlier conversion to the same --to: the files it "
                              "recorded in kerasbert-conversion.json (its checkpoint, "
                              "bert_config.json, vocab.txt), unchanged since; never other files")
    download = _command(
        commands, "download", "download a preset into the cache; prints its folder",
        ["kerasbert download chinese-base",
         "KERASBERT_HOME=/data/kerasbert kerasbert download chinese-roberta-wwm-ext"],
        description="Downloads a preset (see kerasbert presets) into the cache "
                    "(KERASBERT_HOME, else the user cache folder), resuming an interrupted "
                    "download and checking it before it is moved into place; a Hugging Face "
                    "repository is converted to a Google checkpoint once. Prints the folder "
                    "(bert_config.json, vocab.txt, bert_model.ckpt).",
        run=handlers.command_download)
    download.add_argument("name", type=_path, metavar="NAME", help="the preset's name")
    download.add_argument("--quiet", action="store_true", help="no progress bar")

    _command(
        commands, "presets", "list the presets: name, family, size, licence, source, cached",
        ["kerasbert presets"],
        description="Lists the well-known checkpoints kerasbert downloads by name, with "
                    "their family, size (published, or in the cache), licence, source and "
                    "whether they are already in the cache.",
        run=handlers.command_presets)
    return parser


def _parse(parser: argparse.ArgumentParser, words: list[str], prefix: str) -> argparse.Namespace:
    """The parsed ``words``; an unknown flag is named first, before a missing one (argparse
    reports a missing required flag before it looks at the rest)."""
    try:
        args, unknown = parser.parse_known_args(words)
    except UsageError as error:
        missing = getattr(error, "missing", [])
        if not missing:
            raise
        # Again, with a stand-in value for each missing flag or positional argument.
        stand_ins = [word for name in missing
                     for word in ((name.split("/")[0], "x") if name.startswith("-") else ("x",))]
        try:
            _, unknown = parser.parse_known_args(words + stand_ins)
        except UsageError:
            raise error from None
        if not unknown:
            raise
    if unknown:
        raise UsageError(_usage_message(f"unrecognized arguments: {' '.join(unknown)}", prefix))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; returns its exit code (2 on any failure, with one line on stderr)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((word for word in argv if word in COMMANDS), None)
    debug = "--debug" in argv or os.environ.get("KERASBERT_DEBUG") == "1"
    prefix = f"kerasbert {command}" if command else "kerasbert"
    # TensorFlow reads its C++ log level once, when it is first imported by a command.
    if "--verbose" in argv:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    quiet_tensorflow()  # the command's own process: the library itself changes nothing
    warnings = _WarningLines(prefix, verbose="--verbose" in argv)
    terminate = _on_sigterm()
    args = None
    try:
        args = _parse(make_parser(), [word for word in argv if word != "--debug"], prefix)
        check_backend(command, args)
        code = args.run(args)
        warnings.flush()
        return code
    except BrokenPipeError:  # the reader of the output left (`| head`): stop quietly
        warnings.drop()
        _stdout_to_devnull()
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt as stop:
        warnings.drop()
        signal_name = "SIGTERM" if isinstance(stop, Terminated) else "SIGINT"
        print(f"{prefix}: interrupted by {signal_name}{_how_to_continue(command, args)}",
              file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT)
    except Exception as error:  # every failure is one line; --debug shows the traceback
        warnings.drop()
        if debug:
            traceback.print_exc()
        print(f"{prefix}: {one_line(error)}", file=sys.stderr)
        return 2
    finally:
        warnings.close()
        if terminate is not None:
            signal.signal(signal.SIGTERM, terminate)


def _stdout_to_devnull() -> None:
    """Points the closed standard output at /dev/null, so that Python's flush at exit does
    not fail on it a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (stdout replaced): nothing to flush
        pass
    finally:
        os.close(devnull)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that it stops as on Ctrl-C: atomic writes
    undone, the run's lock released, the last epoch's backup kept."""


def _on_sigterm() -> Any:
    """Makes SIGTERM raise :class:`Terminated` while a command runs; returns the handler it
    replaced (None where signals cannot be set: not the main thread)."""
    def stop(signum: int, frame: FrameType | None) -> NoReturn:
        raise Terminated()

    try:
        return signal.signal(signal.SIGTERM, stop)
    except ValueError:
        return None


def _how_to_continue(command: str | None, args: argparse.Namespace | None) -> str:
    """``; continue it with ...`` for an interrupted training run ("" otherwise)."""
    output = getattr(args, "output", None)
    if command not in ("train", "pretrain") or not output:
        return ""
    return (f"; the last finished epoch is kept: continue with kerasbert {command} --resume "
            f"and the same options (--output {output})")


class _WarningLines(logging.Handler):
    """The library's warnings (its ``logging``) as ``kerasbert <command>: warning: ...`` lines
    on stderr, while one command runs.

    They are held back while the command checks its inputs and shown once the checks have
    passed (a training run logs ``STARTED`` when it starts its first step) or the command
    succeeded; a command that fails prints its one line alone (:meth:`drop`).
    """

    def __init__(self, prefix: str, verbose: bool = False) -> None:
        super().__init__(logging.INFO)
        self.prefix = prefix
        self.verbose = verbose
        self.held: list[str] | None = []
        self.logger = logging.getLogger("kerasbert")
        self.saved_level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) is not None:
            # Only the library logs, and it is loaded by then (not when the command starts).
            from kerasbert.training.rundir import STARTED

            if record.event == STARTED:  # type: ignore[attr-defined]  # logged with extra=
                self.flush()
        if record.levelno < logging.WARNING and not self.verbose:
            return
        kind = "warning: " if record.levelno >= logging.WARNING else ""
        line = f"{self.prefix}: {kind}{record.getMessage()}"
        if self.held is None:
            print(line, file=sys.stderr)
        else:
            self.held.append(line)

    def flush(self) -> None:
        """Shows the lines held so far; later ones are shown at once."""
        for line in self.held or ():
            print(line, file=sys.stderr)
        self.held = None

    def drop(self) -> None:
        """Forgets the lines held: the command failed, and says why in its one line."""
        self.held = []

    def close(self) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.saved_level)
        super().close()


def one_line(error: BaseException) -> str:
    """An exception as one line: ``<what> in <where>: <why>`` where the error says so.

    A full disk is ``no space in <folder>: ...``: kerasbert's own
    :class:`~kerasbert.disk_space.NoSpace` as it is, another error that says so
    (untranslated ``ENOSPC``, h5py's or TensorFlow's wording) with its file's folder where
    it names one.
    """
    from kerasbert.disk_space import NoSpace, free_space, is_no_space

    if isinstance(error, NoSpace):
        return str(error)
    if is_no_space(error):
        filename = getattr(error, "filename", None)
        if filename:
            folder = os.path.dirname(os.fspath(filename)) or "."
            return str(NoSpace(folder, free_space(folder), what=os.path.basename(filename)))
        return ("no space in the output: the disk is full; free some space, then run the "
                "command again")
    if isinstance(error, OSError) and error.filename and error.strerror:
        return f"cannot use the file in {error.filename}: {error.strerror}"
    text = " ".join(str(error).split("\n")[0].split())
    # Bytes of a binary file quoted in a message must not reach the terminal raw.
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if isinstance(error, (ValueError, OSError)) and text:
        return text
    return (f"unexpected {type(error).__name__} in kerasbert: {text or 'no message'} "
            "(run again with --debug for the traceback)")


if __name__ == "__main__":
    sys.exit(main())
