"""What each ``kerasbert`` command does, once its arguments are parsed (:mod:`.main`).

Each ``command_*`` takes the ``argparse`` namespace, calls the library and prints the
result; it returns the exit code. Nothing here parses or checks flags beyond what the
library's own option checks do, and TensorFlow is imported only when a command runs.
"""

import json
import os
import sys

from kerasbert.training.options import from_arguments, validate


class UsageError(ValueError):
    """Bad command-line arguments; the message names the flag."""


def _build(args, **overrides):
    from kerasbert.build import build_transformer_model
    from kerasbert.models.heads import add_cls_classifier

    built = build_transformer_model(
        args.config, model=args.model, with_pool=args.with_pool, with_nsp=args.with_nsp,
        with_mlm=args.with_mlm, with_discriminator=args.with_discriminator,
        return_keras_model=False, **overrides)
    if args.num_labels:
        built.model = add_cls_classifier(built.model, args.num_labels)
    return built


def command_audit(args):
    from kerasbert.models import audit

    built = _build(args)
    rows = audit.audit_model(built.model, built.config, args.with_pool, args.with_nsp,
                             args.with_mlm, args.num_labels, built.family,
                             args.with_discriminator)
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


def command_plot(args):
    from kerasbert.models import plot as plotting
    from kerasbert.training.rundir import check_writable

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
    from kerasbert.tasks import task_module
    from kerasbert.training.options import TrainOptions

    options, summary = _run_training(task_module(args.task).train, TrainOptions, args)
    if options.task == "qa":
        shown = "test" if "test" in summary else "dev"
        print(f"\n{shown} exact match {summary[shown]['exact']:.2f}, F1 {summary[shown]['f1']:.2f}"
              f" (best epoch {summary['best_epoch']})")
        print(f"run directory: {options.output} (metrics.json, model.keras, bert_model.ckpt)")
        return 0
    if options.task == "ner":
        shown = "test" if "test" in summary else "dev"
        print(f"\n{shown} entity F1 {summary[shown]['micro']['f1']:.4f} (precision "
              f"{summary[shown]['micro']['precision']:.4f}, recall "
              f"{summary[shown]['micro']['recall']:.4f}; best epoch {summary['best_epoch']})")
        print(f"run directory: {options.output} (metrics.json, model.keras, tags.json)")
        return 0
    shown = "test" if "test" in summary else "dev"
    print(f"\n{shown} accuracy {summary[shown]['accuracy']:.4f}, "
          f"macro-F1 {summary[shown]['macro_f1']:.4f} (best epoch {summary['best_epoch']})")
    skipped = {path: n for path, n in summary["skipped_rows"].items() if n}
    if skipped:
        print("skipped rows: " + ", ".join(f"{n} in {path}" for path, n in skipped.items()))
    print(f"run directory: {options.output} (metrics.json, confusion_matrix.png, "
          "training_curves.png, model.keras)")
    return 0


def _run_training(train, options_class, args):
    """Runs ``train`` on the options of the flags; returns ``(options, summary)``.

    Keras's progress output is a live bar on a terminal and one line per epoch in a
    log file or a pipe, where a bar's redraws would fill the file.
    """
    options = from_arguments(options_class, args)
    validate(options, flags=True)
    return options, train(options, verbose=1 if sys.stdout.isatty() else 2)


def _columns(args):
    """The column overrides of evaluate / predict (None: the run's own)."""
    return {name: getattr(args, name) for name in ("text_column", "pair_column", "label_column")
            if getattr(args, name, None) is not None}


def command_evaluate(args):
    from kerasbert.tasks import open_run

    run = open_run(args.model)
    if run.options.task == "qa":
        metrics = run.evaluate(args.data)
        print(json.dumps(metrics, indent=2) if args.json else
              f"questions {metrics['total']}  exact match {metrics['exact']:.2f}  "
              f"F1 {metrics['f1']:.2f}")
        return 0
    if run.options.task == "ner":
        if _columns(args):
            raise UsageError("column in --text-column/--pair-column/--label-column: a NER "
                             "run reads CoNLL or JSONL files, which have no columns")
        metrics = run.evaluate(args.data, progress=True)
        if args.json:
            print(json.dumps(metrics, indent=2, ensure_ascii=False))
            return 0
        print(f"sentences {metrics['sentences']}  entity precision "
              f"{metrics['micro']['precision']:.4f}  recall {metrics['micro']['recall']:.4f}  "
              f"F1 {metrics['micro']['f1']:.4f}")
        for kind, row in metrics["per_type"].items():
            print(f"  {kind:<6}  precision {row['precision']:.4f}  recall {row['recall']:.4f}  "
                  f"F1 {row['f1']:.4f}  support {row['support']}")
        return 0
    metrics = run.evaluate(args.data, progress=True, **_columns(args))
    if args.json:
        print(json.dumps(metrics, indent=2, ensure_ascii=False))
    else:
        print(f"examples {metrics['examples']}  accuracy {metrics['accuracy']:.4f}  "
              f"macro-F1 {metrics['macro_f1']:.4f}")
        width = max(len(label) for label in metrics["per_class"])
        for label, row in metrics["per_class"].items():
            print(f"  {label:<{width}}  precision {row['precision']:.4f}  recall "
                  f"{row['recall']:.4f}  F1 {row['f1']:.4f}  support {row['support']}")
    return 0


def command_predict(args):
    from kerasbert.tasks import open_run

    if not args.input and not args.texts:
        raise UsageError("missing input in --input or TEXT: give texts to classify, or a file")
    if args.input and args.texts:
        raise UsageError("too many inputs in --input and TEXT: give texts or a file, not both")
    if not args.input and _columns(args):
        raise UsageError("column without a file in --text-column/--pair-column/--label-column: "
                         "columns apply to --input")
    for number, text in enumerate(args.texts, start=1):
        if not text.strip():
            raise UsageError(f"empty text in TEXT {number}: nothing to classify")
    run = open_run(args.model)
    if run.options.task == "qa" and not args.input and len(args.texts) % 2:
        raise UsageError(f"odd number of texts in TEXT ({len(args.texts)}): a QA run takes "
                         "QUESTION CONTEXT pairs")
    rows = (run.predict(path=args.input, progress=True, **_columns(args)) if args.input
            else run.predict(texts=args.texts))
    for row in rows:
        print(json.dumps(row, ensure_ascii=False))
    return 0


def command_export(args):
    from kerasbert.tasks import open_run

    options = {"version": args.version} if args.format == "saved_model" else {}
    if args.int8:
        if args.format != "onnx":
            raise UsageError(f"invalid flag in --int8: only with --format onnx, not "
                             f"--format {args.format}")
        options["int8"] = True
    for path in open_run(args.model).export(args.to, overwrite=args.overwrite, format=args.format,
                                       **options):
        print(f"wrote {path}")
    return 0


def command_pretrain(args):
    from kerasbert.pretraining import mlm as pretrain  # the module

    options, summary = _run_training(pretrain.pretrain, pretrain.PretrainOptions, args)
    print(f"\n{summary['steps']} steps, vocabulary {summary['vocab_size']}, "
          f"{summary['parameters']:,} parameters, {summary['wall_seconds']:.0f} s")
    if "dev" in summary:
        print(f"dev MLM accuracy {summary['dev']['accuracy']:.4f}, loss "
              f"{summary['dev']['loss']:.4f} ({summary['dev']['masked_tokens']} masked tokens)")
    print(f"wrote {options.output} (bert_model.ckpt, bert_config.json, vocab.txt, "
          "pretrain_metrics.json)")
    return 0


def command_convert(args):
    from kerasbert.checkpoints.convert import convert_hf_to_google
    from kerasbert.training.rundir import check_writable

    check_writable(os.path.dirname(args.to) or ".", flag="--to")
    done = convert_hf_to_google(args.from_hf, args.to)
    print(f"wrote {done.prefix} ({done.variables} variables) and {done.config_path}")
    print(f"wrote {done.vocab_path}" if done.vocab_path else f"no vocab.txt in {args.from_hf}")
    if done.skipped:
        print(f"left out (no Google name): {', '.join(done.skipped)}")
    return 0
