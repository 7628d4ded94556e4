import { DIGITS, HEX, hex8 } from './format.js';

/** mulberry32: tiny, fast and good enough for synthetic data; one stream per user, seeded from (seed, index). */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed | 0;
  }
  next(): number {
    this.s = (this.s + 0x6d2b79f5) | 0;
    let t = Math.imul(this.s ^ (this.s >>> 15), 1 | this.s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  u32(): number {
    return (this.next() * 4294967296) >>> 0;
  }
  hex(words: number): string {
    let out = '';
    for (let i = 0; i < words; i++) out += hex8(this.u32());
    return out;
  }
  uuid(): string {
    const a = this.u32();
    const b = this.u32();
    const c = this.u32();
    const d = this.u32();
    return `${hex8(a)}-${HEX[b >>> 24]}${HEX[(b >>> 16) & 255]}-4${HEX[(b >>> 8) & 255]!.slice(1)}${HEX[b & 255]}-${HEX[0x80 | ((c >>> 24) & 0x3f)]}${HEX[(c >>> 16) & 255]}-${HEX[(c >>> 8) & 255]}${HEX[c & 255]}${hex8(d)}`;
  }
  digits(n: number): string {
    let out = '';
    for (let i = 0; i < n; i++) out += DIGITS[this.int(10)];
    return out;
  }
  /** A time uniformly between a and b (ms). */
  between(a: number, b: number): number {
    return b <= a ? a : a + Math.floor(this.next() * (b - a));
  }
}

/** murmur3's 32-bit finalizer: spreads a seed's bits so that neighbouring seeds and indexes give unrelated streams. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
