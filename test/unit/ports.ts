/** Ports for the unit tests' clients and servers on 127.0.0.1. */
import * as net from "net";

/** A port nobody listens on (the OS gave it to a listener, which closed it again). */
export async function closedPort(): Promise<number> {
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const { port } = probe.address() as net.AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    return port;
}
