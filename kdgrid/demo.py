"""The offline demo study, end to end. It grows as the core, sweep and analysis land; each step it cannot take
yet is reported as such, never faked."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def run_demo(quick: bool = False) -> None:
    """Fetch the assets and run every stage of the demo that exists so far, printing a table at the end."""
    from kdgrid import assets

    console = Console()
    located = assets.fetch_all()
    files = assets.polarity_files()
    import json

    split = json.loads(files.split.read_text())
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(located["teacher"])
    tokenizer = AutoTokenizer.from_pretrained(located["teacher"])
    table = Table(
        title="kdgrid demo: offline assets (the distillation study lands with the core and sweep issues)"
    )
    for column in ("asset", "facts"):
        table.add_column(column)
    table.add_row(
        "teacher all-MiniLM-L6-v2",
        f"{config.num_hidden_layers} layers, width {config.hidden_size}, {config.num_attention_heads} heads, "
        f"FFN {config.intermediate_size}, vocab {tokenizer.vocab_size}",
    )
    table.add_row(
        "polarity corpus", f"train {split['train_size']}, dev {split['dev_size']}, split seed {split['seed']}"
    )
    console.print(table)
