"""Run a command with its CPU affinity set (inherited by everything it starts):

    python3 bench/pin.py SPEC -- command args...

SPEC: ``all`` (leave the affinity as it is), a cpulist (``0-3,8``), or ``gpu:N`` (the first N CPUs of
GPU 0's local CPU list from sysfs, intersected with the current affinity; the whole local list when N
is 0). For same-machine A/Bs of the host path's speed (bench/probe_cpu.py) without taskset.
"""
import os
import subprocess
import sys


def parse_cpulist(text):
    cpus = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def gpu_local_cpus():
    bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"],
                         capture_output=True, text=True, check=True).stdout.strip().lower()
    # nvidia-smi prints an 8-digit domain (00000000:18:00.0); sysfs names the device 0000:18:00.0.
    domain, rest = bus.split(":", 1)
    with open(f"/sys/bus/pci/devices/{domain[-4:]}:{rest}/local_cpulist") as f:
        return parse_cpulist(f.read())


def resolve(spec):
    allowed = sorted(os.sched_getaffinity(0))
    if spec == "all":
        return allowed
    if spec.startswith("gpu:"):
        n = int(spec[4:])
        local = [c for c in gpu_local_cpus() if c in allowed] or allowed
        return local[:n] if n > 0 else local
    return parse_cpulist(spec)


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(__doc__)
    cpus = resolve(sys.argv[1])
    os.sched_setaffinity(0, cpus)
    print(f"pin.py: {sys.argv[1]} -> CPUs {cpus}", file=sys.stderr, flush=True)
    os.execvp(sys.argv[3], sys.argv[3:])


if __name__ == "__main__":
    main()
