/** The benchmark's progress lines, on stderr (stdout gets the report). */
export const log = (message: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);
