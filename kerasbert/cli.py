"""``kerasbert <command>``: parses arguments and calls the library, nothing more."""

import argparse
import dataclasses
import json
import os
import sys

# Quiet TensorFlow's C++ start-up chatter before anything imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _model_arguments(parser):
    parser.add_argument("config", help="bert_config.json (Google) or config.json (Hugging Face)")
    parser.add_argument("--num-labels", type=int, default=None,
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

    fields = {f.name for f in dataclasses.fields(finetune.TrainOptions)}
    options = finetune.TrainOptions(**{k: v for k, v in vars(args).items() if k in fields})
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
        raise ValueError("give texts to classify, or --input FILE")
    run = Run(args.model)
    rows = run.predict(path=args.input) if args.input else run.predict(texts=args.texts)
    for row in rows:
        print(json.dumps(row, ensure_ascii=False))
    return 0


def command_export(args):
    from kerasbert.finetune import Run

    print(f"wrote {Run(args.model).export(args.to)}")
    return 0


def _train_arguments(parser):
    add = parser.add_argument
    add("--train", help="labelled TSV/CSV/JSONL (default: the shipped review split)")
    add("--dev", help="labelled file for choosing the best epoch")
    add("--test", help="labelled file evaluated once at the end")
    add("--output", required=True, help="run directory to create")
    add("--config", help="bert_config.json (default: the shipped kerasbert-zh-small)")
    add("--checkpoint", help="Google checkpoint prefix to start from")
    add("--vocab", help="vocab.txt (default: beside the config)")
    add("--text-column", default="text")
    add("--pair-column", default=None, help="second text of sentence pairs")
    add("--label-column", default="label")
    for name, kind, default in (("--maxlen", int, 128), ("--batch-size", int, 32),
                                ("--epochs", int, 3), ("--lr", float, 2e-5),
                                ("--warmup", float, 0.1), ("--weight-decay", float, 0.01),
                                ("--grad-accum", int, 1), ("--dropout", float, 0.1),
                                ("--patience", int, 2), ("--seed", int, 42),
                                ("--max-train-examples", int, None)):
        add(name, type=kind, default=default)
    add("--mixed-precision", action="store_true", help="bfloat16 compute (float32 weights)")
    add("--jit-compile", action="store_true", help="compile the train step with XLA")
    add("--strategy", choices=["mirrored", "multi-worker"], default=None)
    add("--skip-bad-rows", action="store_true", help="skip and count bad rows instead of failing")
    add("--resume", action="store_true", help="continue an interrupted run in --output")


def command_pretrain(args):
    from kerasbert import pretrain  # the module

    fields = {f.name for f in dataclasses.fields(pretrain.PretrainOptions)}
    options = pretrain.PretrainOptions(**{k: v for k, v in vars(args).items() if k in fields})
    summary = pretrain.pretrain(options)
    print(f"\n{summary['steps']} steps, vocabulary {summary['vocab_size']}, "
          f"{summary['parameters']:,} parameters, {summary['wall_seconds']:.0f} s")
    if "dev" in summary:
        print(f"dev MLM accuracy {summary['dev']['accuracy']:.4f}, loss "
              f"{summary['dev']['loss']:.4f} ({summary['dev']['masked_tokens']} masked tokens)")
    print(f"wrote {options.output} (bert_model.ckpt, bert_config.json, vocab.txt, "
          "pretrain_metrics.json)")
    return 0


def _pretrain_arguments(parser):
    add = parser.add_argument
    add("--config", required=True, help="bert_config.json of the model to pretrain "
        "(its vocab_size is replaced by the reduced vocabulary's)")
    add("--vocab", required=True, help="full vocab.txt; the corpus's tokens are kept")
    add("--corpus", required=True, nargs="+", metavar="FILE",
        help="labelled TSV/CSV/JSONL (its text column) or plain text, one text per line")
    add("--output", required=True, help="directory to write the checkpoint to")
    add("--dev", nargs="+", metavar="FILE", help="text to measure MLM accuracy on at the end")
    add("--checkpoint", help="Google checkpoint to start from (default: random init)")
    add("--text-column", default="text")
    for name, kind, default in (("--steps", int, 10000), ("--steps-per-epoch", int, 200),
                                ("--batch-size", int, 32), ("--maxlen", int, 128),
                                ("--lr", float, 5e-4), ("--warmup", float, 0.1),
                                ("--weight-decay", float, 0.01), ("--seed", int, 42)):
        add(name, type=kind, default=default)
    add("--save-dtype", choices=["float32", "float16"], default="float32",
        help="dtype of the written checkpoint (float16 halves its size)")
    add("--jit-compile", action="store_true", help="compile the train step with XLA")
    add("--resume", action="store_true", help="continue an interrupted run in --output")


def command_convert(args):
    from kerasbert.convert import convert_hf_to_google

    done = convert_hf_to_google(args.from_hf, args.to)
    print(f"wrote {done.prefix} ({done.variables} variables) and {done.config_path}")
    print(f"wrote {done.vocab_path}" if done.vocab_path else f"no vocab.txt in {args.from_hf}")
    if done.skipped:
        print(f"left out (no Google name): {', '.join(done.skipped)}")
    return 0


def make_parser():
    parser = argparse.ArgumentParser(prog="kerasbert", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    audit = commands.add_parser("audit", help="print model.summary() and check every parameter count")
    _model_arguments(audit)
    audit.add_argument("--json", action="store_true", help="print the audit as JSON")
    audit.set_defaults(run=command_audit)

    plot = commands.add_parser("plot", help="draw the model with keras.utils.plot_model")
    _model_arguments(plot)
    plot.add_argument("-o", "--output", required=True, help="picture to write (.png, .svg, .pdf)")
    plot.add_argument("--layers", type=int, default=None,
                      help="draw a model cut to this many transformer layers (a readable picture)")
    plot.set_defaults(run=command_plot)

    train = commands.add_parser("train", help="fine-tune a BERT text classifier")
    _train_arguments(train)
    train.set_defaults(run=command_train)

    pretrain = commands.add_parser(
        "pretrain", help="masked-LM pretraining; writes a Google checkpoint")
    _pretrain_arguments(pretrain)
    pretrain.set_defaults(run=command_pretrain)

    evaluate = commands.add_parser("evaluate", help="metrics of a run's model on a labelled file")
    evaluate.add_argument("--model", required=True, help="run directory")
    evaluate.add_argument("--data", required=True, help="labelled TSV/CSV/JSONL")
    evaluate.add_argument("--json", action="store_true")
    evaluate.set_defaults(run=command_evaluate)

    predict = commands.add_parser("predict", help="classify texts (JSON lines out)")
    predict.add_argument("--model", required=True, help="run directory")
    predict.add_argument("--input", help="file whose text column to classify")
    predict.add_argument("texts", nargs="*")
    predict.set_defaults(run=command_predict)

    export = commands.add_parser("export", help="write a TensorFlow SavedModel")
    export.add_argument("--model", required=True, help="run directory")
    export.add_argument("--to", required=True, help="SavedModel directory to write")
    export.set_defaults(run=command_export)

    convert = commands.add_parser(
        "convert", help="write a Google checkpoint, bert_config.json and vocab.txt")
    convert.add_argument("--from-hf", required=True, metavar="DIR",
                         help="Hugging Face BERT directory: config.json, model.safetensors, "
                              "vocab.txt")
    convert.add_argument("--to", required=True, metavar="PREFIX",
                         help="checkpoint prefix to write, e.g. out/minilm/bert_model.ckpt")
    convert.set_defaults(run=command_convert)
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        print(f"kerasbert {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
