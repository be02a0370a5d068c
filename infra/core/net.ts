/** IPv4 arithmetic: addresses and CIDR blocks. Pure. */

/** Parses dotted-quad IPv4 into a 32-bit unsigned number, or undefined. */
export function ipv4ToNumber(ip: string): number | undefined {
    const parts = ip.split(".");
    if (parts.length !== 4) {
        return undefined;
    }
    let value = 0;
    for (const part of parts) {
        if (!/^(0|[1-9][0-9]{0,2})$/.test(part) || Number(part) > 255) {
            return undefined;
        }
        value = value * 256 + Number(part);
    }
    return value;
}

/** An IPv4 CIDR block, parsed. */
export interface Cidr {
    readonly cidr: string;
    readonly network: number;
    readonly prefix: number;
}

/** Parses `a.b.c.d/n`; undefined when it is not an IPv4 CIDR or has host bits set. */
export function parseCidr(cidr: string): Cidr | undefined {
    const match = /^([0-9.]+)\/([0-9]{1,2})$/.exec(cidr);
    if (!match) {
        return undefined;
    }
    const network = ipv4ToNumber(match[1]);
    const prefix = Number(match[2]);
    if (network === undefined || prefix > 32) {
        return undefined;
    }
    const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
    if ((network & mask) >>> 0 !== network) {
        return undefined;
    }
    return { cidr, network, prefix };
}

/** True when `ip` lies inside `block`. */
export function cidrContains(block: Cidr, ip: string): boolean {
    const value = ipv4ToNumber(ip);
    if (value === undefined) {
        return false;
    }
    const mask = block.prefix === 0 ? 0 : (0xffffffff << (32 - block.prefix)) >>> 0;
    return (value & mask) >>> 0 === block.network;
}

/** An address as the host of a URL: an IPv6 one in brackets. */
export function urlHost(address: string): string {
    return address.includes(":") ? `[${address}]` : address;
}
