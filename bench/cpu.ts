/**
 * CPU time from /proc (Linux), for benchmarks on a small shared machine: what a phase cost in CPU is steadier than
 * how long it took, and tells which process the two cores went to.
 */
import { readFileSync, readdirSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ: 100 on every Linux architecture Node runs on (`getconf CLK_TCK`)

/** utime + stime of one process, in seconds (0 once it has exited). */
export function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces), counted from field 3: utime is 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** The live children of a process. */
export function childPids(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // exited while listed
    }
  }
  return children;
}

/**
 * The live child of a process whose command line ends with `lastArg` (for `ces start`, its `worker` child: tsx also
 * starts an esbuild child, in no fixed order).
 */
export function childPidRunning(pid: number, lastArg: string): number | undefined {
  return childPids(pid).find((child) => {
    try {
      const args = readFileSync(`/proc/${child}/cmdline`, 'utf8').split('\0').filter(Boolean);
      return args.at(-1) === lastArg;
    } catch {
      return false;
    }
  });
}

/** Busy and total CPU time of the whole machine (all cores), in seconds since boot. */
export function machineCpuSeconds(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  // cpu user nice system idle iowait irq softirq steal ...
  const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = ticks.reduce((a, b) => a + b, 0);
  const idle = ticks[3]! + ticks[4]!;
  return { busy: (total - idle) / TICKS_PER_SECOND, total: total / TICKS_PER_SECOND };
}

/** Starts counting the CPU of the named processes and of the machine; `stop()` gives seconds spent since. */
export function cpuMeter(pids: Record<string, number | undefined>) {
  const start = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, pid ? processCpuSeconds(pid) : 0]));
  const machine = machineCpuSeconds();
  return {
    stop() {
      const used = Object.fromEntries(
        Object.entries(pids).map(([name, pid]) => [name, pid ? processCpuSeconds(pid) - start[name]! : 0]),
      );
      const now = machineCpuSeconds();
      return { used, machineBusy: (now.busy - machine.busy) / (now.total - machine.total) };
    },
  };
}
