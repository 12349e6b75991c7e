"""``kerasbert <command>``: parses arguments and calls the library, nothing more."""

import argparse
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
    except (ValueError, FileNotFoundError) as error:
        print(f"kerasbert {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
