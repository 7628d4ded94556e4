import { isIP } from 'node:net';

/**
 * Why an address is not a public unicast one: the special-purpose range it falls in (RFC 6890 and the IANA
 * special-purpose registries), or 'public'.
 */
export type AddressClass =
  | 'public'
  | 'unspecified'
  | 'this-network'
  | 'loopback'
  | 'private'
  | 'shared'
  | 'link-local'
  | 'site-local'
  | 'unique-local'
  | 'ietf-protocol'
  | 'documentation'
  | 'benchmarking'
  | 'multicast'
  | 'reserved'
  | 'broadcast'
  | 'discard'
  | 'nat64-local'
  | 'teredo';

/**
 * The bytes of an IP literal: 4 for IPv4, 16 for IPv6; null when Node's isIP does not take the text for one. IPv4 is
 * the dotted quad only (no octal, hex or short forms); IPv6 is any spelling, its zone id (`%eth0`) ignored.
 */
export function parseIpAddress(text: string): Uint8Array | null {
  const version = isIP(text);
  if (version === 4) return Uint8Array.from(text.split('.').map(Number));
  if (version !== 6) return null;
  const address = text.split('%', 1)[0]!.toLowerCase();
  const bytes = new Uint8Array(16);
  const [head = '', tail] = address.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [
    ...headGroups,
    ...(tail === undefined ? [] : Array<string>(8 - countGroups(headGroups) - countGroups(tailGroups)).fill('0')),
    ...tailGroups,
  ];
  let at = 0;
  for (const group of groups) {
    if (group.includes('.')) {
      for (const octet of group.split('.')) bytes[at++] = Number(octet);
    } else {
      const value = parseInt(group, 16);
      bytes[at++] = value >> 8;
      bytes[at++] = value & 0xff;
    }
  }
  return bytes;
}

/** A dotted IPv4 tail takes the room of two 16-bit groups. */
function countGroups(groups: string[]): number {
  return groups.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
}

/** The class of an IP literal (see AddressClass), or null when the text is not an IP address. */
export function classifyAddress(text: string): AddressClass | null {
  const bytes = parseIpAddress(text);
  if (!bytes) return null;
  return bytes.length === 4 ? classifyIpv4(bytes) : classifyIpv6(bytes);
}

/** True for an IP literal outside public unicast space; false for a public address and for anything not an address. */
export function isNonPublicAddress(text: string): boolean {
  const kind = classifyAddress(text);
  return kind !== null && kind !== 'public';
}

function classifyIpv4(octets: Uint8Array): AddressClass {
  const [a = 0, b = 0, c = 0, d = 0] = octets;
  if (a === 0) return 'this-network';
  if (a === 10) return 'private';
  if (a === 100 && (b & 0xc0) === 64) return 'shared';
  if (a === 127) return 'loopback';
  if (a === 169 && b === 254) return 'link-local';
  if (a === 172 && (b & 0xf0) === 16) return 'private';
  if (a === 192 && b === 0 && c === 0) return 'ietf-protocol';
  if (a === 192 && b === 0 && c === 2) return 'documentation';
  if (a === 192 && b === 168) return 'private';
  if (a === 198 && (b & 0xfe) === 18) return 'benchmarking';
  if (a === 198 && b === 51 && c === 100) return 'documentation';
  if (a === 203 && b === 0 && c === 113) return 'documentation';
  if ((a & 0xf0) === 224) return 'multicast';
  if (a === 255 && b === 255 && c === 255 && d === 255) return 'broadcast';
  if ((a & 0xf0) === 240) return 'reserved';
  return 'public';
}

function zeros(b: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (b[i] !== 0) return false;
  return true;
}

function startsWith(b: Uint8Array, prefix: number[]): boolean {
  return prefix.every((v, i) => b[i] === v);
}

function classifyIpv6(b: Uint8Array): AddressClass {
  const last4 = b.subarray(12, 16);
  if (zeros(b, 0, 16)) return 'unspecified';
  if (zeros(b, 0, 15) && b[15] === 1) return 'loopback';
  // The forms that carry an IPv4 address are judged by it: a socket connected to ::ffff:127.0.0.1 talks to 127.0.0.1.
  if (zeros(b, 0, 10) && b[10] === 0xff && b[11] === 0xff) return classifyIpv4(last4); // IPv4-mapped ::ffff:0:0/96
  if (zeros(b, 0, 12)) return classifyIpv4(last4); // IPv4-compatible ::/96 (deprecated)
  if (zeros(b, 0, 8) && b[8] === 0xff && b[9] === 0xff && b[10] === 0 && b[11] === 0) return classifyIpv4(last4); // IPv4-translated ::ffff:0:0:0/96
  if (startsWith(b, [0x00, 0x64, 0xff, 0x9b]) && zeros(b, 4, 12)) return classifyIpv4(last4); // NAT64 64:ff9b::/96
  if (startsWith(b, [0x00, 0x64, 0xff, 0x9b, 0x00, 0x01])) return 'nat64-local'; // 64:ff9b:1::/48 translates to whatever the local network says
  if (startsWith(b, [0x20, 0x02])) return classifyIpv4(b.subarray(2, 6)); // 6to4 2002::/16
  // Teredo 2001::/32 is refused outright rather than judged by its client address: it names a server and a client
  // IPv4 (either may be internal), the protocol is long obsolete, and no callback receiver is reached that way.
  if (startsWith(b, [0x20, 0x01, 0x00, 0x00])) return 'teredo';
  if (startsWith(b, [0x20, 0x01, 0x0d, 0xb8])) return 'documentation';
  if (startsWith(b, [0x01, 0x00]) && zeros(b, 2, 8)) return 'discard'; // 100::/64
  if ((b[0]! & 0xfe) === 0xfc) return 'unique-local';
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return 'link-local';
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0xc0) return 'site-local';
  if (b[0] === 0xff) return 'multicast';
  // Outside 2000::/3 nothing is allocated as global unicast.
  if ((b[0]! & 0xe0) !== 0x20) return 'reserved';
  return 'public';
}

/** A URL's host as a bare name or address: IPv6 brackets and a trailing dot removed, lower case. */
export function urlHost(url: URL): string {
  return url.hostname
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase();
}
