"""kerasbert: build, audit, draw, fine-tune, pretrain and convert Google BERT models on Keras 3.

A failure ends with exit code 2 and one line on stderr,
``kerasbert <command>: <what> in <file or flag>: <why>``; ``--debug`` (or
``KERASBERT_DEBUG=1``) adds the traceback.
"""

import argparse
import json
import os
import re
import sys
import traceback

from kerasbert.options import add_arguments, from_arguments, validate

# Quiet TensorFlow's C++ start-up chatter before anything imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
COMMANDS = ("audit", "plot", "train", "pretrain", "evaluate", "predict", "export", "convert")


class UsageError(ValueError):
    """Bad command-line arguments; the message names the flag."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors raised (one line, from :func:`main`) instead of printed."""

    def error(self, message):
        raise UsageError(_usage_message(message, self.prog))


def _usage_message(message, prog):
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


def _count(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid value {value}: must be at least 1")
    return value


def _path(text):
    if not text.strip():
        raise argparse.ArgumentTypeError("invalid value '': must not be empty")
    return text


def _model_arguments(parser):
    parser.add_argument("config", type=_path,
                        help="bert_config.json (Google) or config.json (Hugging Face)")
    parser.add_argument("--num-labels", type=_count, default=None,
                        help="add the CLS-token classifier with this many labels")
    parser.add_argument("--with-pool", action="store_true", help="add Pooler/Pooler-Dense")
    parser.add_argument("--with-nsp", action="store_true", help="add the NSP head")
    parser.add_argument("--with-mlm", action="store_true", help="add the MLM head")


def _build(args, **overrides):
    from kerasbert.heads import add_cls_classifier
    from kerasbert.models import Transformer, build_transformer_model

    built = build_transformer_model(
        args.config, with_pool=args.with_pool, with_nsp=args.with_nsp, with_mlm=args.with_mlm,
        return_keras_model=False, **overrides)
    model = built.model
    if args.num_labels:
        model = add_cls_classifier(model, args.num_labels)
    return Transformer(model, built.config)


def command_audit(args):
    from kerasbert import audit

    built = _build(args)
    rows = audit.audit_model(built.model, built.config, args.with_pool, args.with_nsp,
                             args.with_mlm, args.num_labels)
    total = built.model.count_params()
    report = audit.to_json(rows, total)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        built.model.summary(line_length=110)
        print()
        print(audit.format_table(rows, total))
        print("\naudit:", "every count matches" if report["ok"] else "MISMATCH")
    return 0 if report["ok"] else 1


def command_plot(args):
    from kerasbert import plotting
    from kerasbert.rundir import check_writable

    check_writable(os.path.dirname(args.output) or ".", flag="--output")
    overrides = {"num_hidden_layers": args.layers} if args.layers else {}
    built = _build(args, **overrides)
    try:
        plotting.plot(built.model, args.output)
    except plotting.GraphvizMissing as error:
        print(f"kerasbert plot: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


def command_train(args):
    from kerasbert import finetune

    options = from_arguments(finetune.TrainOptions, args)
    validate(options, flags=True)
    summary = finetune.train(options)
    shown = "test" if "test" in summary else "dev"
    print(f"\n{shown} accuracy {summary[shown]['accuracy']:.4f}, "
          f"macro-F1 {summary[shown]['macro_f1']:.4f} (best epoch {summary['best_epoch']})")
    skipped = {path: n for path, n in summary["skipped_rows"].items() if n}
    if skipped:
        print("skipped rows: " + ", ".join(f"{n} in {path}" for path, n in skipped.items()))
    print(f"run directory: {options.output} (metrics.json, confusion_matrix.png, "
          "training_curves.png, model.keras)")
    return 0


def command_evaluate(args):
    from kerasbert.finetune import Run

    metrics = Run(args.model).evaluate(args.data)
    if args.json:
        print(json.dumps(metrics, indent=2, ensure_ascii=False))
    else:
        print(f"examples {metrics['examples']}  accuracy {metrics['accuracy']:.4f}  "
              f"macro-F1 {metrics['macro_f1']:.4f}")
        for label, row in metrics["per_class"].items():
            print(f"  {label:<20} precision {row['precision']:.4f}  recall {row['recall']:.4f}  "
                  f"F1 {row['f1']:.4f}  support {row['support']}")
    return 0


def command_predict(args):
    from kerasbert.finetune import Run

    if not args.input and not args.texts:
        raise UsageError("missing input in --input or TEXT: give texts to classify, or a file")
    if args.input and args.texts:
        raise UsageError("too many inputs in --input and TEXT: give texts or a file, not both")
    for number, text in enumerate(args.texts, start=1):
        if not text.strip():
            raise UsageError(f"empty text in TEXT {number}: nothing to classify")
    run = Run(args.model)
    rows = run.predict(path=args.input) if args.input else run.predict(texts=args.texts)
    for row in rows:
        print(json.dumps(row, ensure_ascii=False))
    return 0


def command_export(args):
    from kerasbert.finetune import Run

    print(f"wrote {Run(args.model).export(args.to, overwrite=args.overwrite)}")
    return 0


def command_pretrain(args):
    from kerasbert import pretrain  # the module

    options = from_arguments(pretrain.PretrainOptions, args)
    validate(options, flags=True)
    summary = pretrain.pretrain(options)
    print(f"\n{summary['steps']} steps, vocabulary {summary['vocab_size']}, "
          f"{summary['parameters']:,} parameters, {summary['wall_seconds']:.0f} s")
    if "dev" in summary:
        print(f"dev MLM accuracy {summary['dev']['accuracy']:.4f}, loss "
              f"{summary['dev']['loss']:.4f} ({summary['dev']['masked_tokens']} masked tokens)")
    print(f"wrote {options.output} (bert_model.ckpt, bert_config.json, vocab.txt, "
          "pretrain_metrics.json)")
    return 0


def command_convert(args):
    from kerasbert.convert import convert_hf_to_google
    from kerasbert.rundir import check_writable

    check_writable(os.path.dirname(args.to) or ".", flag="--to")
    done = convert_hf_to_google(args.from_hf, args.to)
    print(f"wrote {done.prefix} ({done.variables} variables) and {done.config_path}")
    print(f"wrote {done.vocab_path}" if done.vocab_path else f"no vocab.txt in {args.from_hf}")
    if done.skipped:
        print(f"left out (no Google name): {', '.join(done.skipped)}")
    return 0


def make_parser():
    parser = _Parser(prog="kerasbert", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of a failure (also KERASBERT_DEBUG=1)")
    commands = parser.add_subparsers(dest="command", required=True)

    audit = commands.add_parser("audit", help="print model.summary() and check every parameter count")
    _model_arguments(audit)
    audit.add_argument("--json", action="store_true", help="print the audit as JSON")
    audit.set_defaults(run=command_audit)

    plot = commands.add_parser("plot", help="draw the model with keras.utils.plot_model")
    _model_arguments(plot)
    plot.add_argument("-o", "--output", required=True, type=_path,
                      help="picture to write (.png, .svg, .pdf)")
    plot.add_argument("--layers", type=_count, default=None,
                      help="draw a model cut to this many transformer layers (a readable picture)")
    plot.set_defaults(run=command_plot)

    from kerasbert.options import PretrainOptions, TrainOptions

    train = commands.add_parser("train", help="fine-tune a BERT text classifier")
    add_arguments(train, TrainOptions)
    train.set_defaults(run=command_train)

    pretrain = commands.add_parser(
        "pretrain", help="masked-LM pretraining; writes a Google checkpoint")
    add_arguments(pretrain, PretrainOptions)
    pretrain.set_defaults(run=command_pretrain)

    evaluate = commands.add_parser("evaluate", help="metrics of a run's model on a labelled file")
    evaluate.add_argument("--model", required=True, type=_path, help="run directory")
    evaluate.add_argument("--data", required=True, type=_path, help="labelled TSV/CSV/JSONL")
    evaluate.add_argument("--json", action="store_true")
    evaluate.set_defaults(run=command_evaluate)

    predict = commands.add_parser("predict", help="classify texts (JSON lines out)")
    predict.add_argument("--model", required=True, type=_path, help="run directory")
    predict.add_argument("--input", type=_path, help="file whose text column to classify")
    predict.add_argument("texts", nargs="*")
    predict.set_defaults(run=command_predict)

    export = commands.add_parser("export", help="write a TensorFlow SavedModel")
    export.add_argument("--model", required=True, type=_path, help="run directory")
    export.add_argument("--to", required=True, type=_path,
                        help="SavedModel directory to write (new or empty)")
    export.add_argument("--overwrite", action="store_true",
                        help="replace an earlier export in --to (never anything else)")
    export.set_defaults(run=command_export)

    convert = commands.add_parser(
        "convert", help="write a Google checkpoint, bert_config.json and vocab.txt")
    convert.add_argument("--from-hf", required=True, type=_path, metavar="DIR",
                         help="Hugging Face BERT directory: config.json, model.safetensors, "
                              "vocab.txt")
    convert.add_argument("--to", required=True, type=_path, metavar="PREFIX",
                         help="checkpoint prefix to write, e.g. out/minilm/bert_model.ckpt")
    convert.set_defaults(run=command_convert)
    return parser


def main(argv=None):
    """Runs one command; returns its exit code (2 on any failure, with one line on stderr)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((word for word in argv if word in COMMANDS), None)
    debug = "--debug" in argv or os.environ.get("KERASBERT_DEBUG") == "1"
    prefix = f"kerasbert {command}" if command else "kerasbert"
    try:
        parser = make_parser()
        args, unknown = parser.parse_known_args([word for word in argv if word != "--debug"])
        if unknown:
            raise UsageError(f"unknown argument in {' '.join(unknown)}: not an argument of "
                             f"{prefix} (see {prefix} --help)")
        return args.run(args)
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # every failure is one line; --debug shows the traceback
        if debug:
            traceback.print_exc()
        print(f"{prefix}: {one_line(error)}", file=sys.stderr)
        return 2


def one_line(error):
    """An exception as one line: ``<what> in <where>: <why>`` where the error says so."""
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
