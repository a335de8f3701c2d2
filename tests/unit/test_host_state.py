"""The node's own state in a bundle: the kernel log's Neuron driver lines."""

from __future__ import annotations

from neuron_watch.node.host_state import kernel_lines


def test_kernel_lines_keeps_only_neuron_driver_lines() -> None:
    dmesg = [
        "[Sat Nov 21 13:00:00 2026] e1000: eth0 link up",
        "[Sat Nov 21 13:00:01 2026] NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR instance-id=i-0592464924bd45322 "
        "hostname=ip-172-31-61-252 nd-id=0 nc-id=0 serial-num=19fcda00f5ff6eb9 action=TERMINATE_INSTANCE",
        "[Sat Nov 21 13:00:02 2026] neuron: nd0: DMA engine reset",
        "[Sat Nov 21 13:00:03 2026] audit: neuronx-cc exec",
    ]
    assert kernel_lines(dmesg) == dmesg[1:3]
