// A referee client in another language: Node.js with @grpc/grpc-js, the contract loaded from
// protos/ by @grpc/proto-loader (nothing generated). It makes the calls given as JSON lines on
// stdin ({"method": ..., "request": {...}}) against the address in argv[2], and prints one JSON
// line per call: {"reply": {...}} or {"code": N, "details": "..."}.
"use strict";

const path = require("path");
const readline = require("readline");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const protos = path.join(__dirname, "..", "..", "protos");
const definition = protoLoader.loadSync("remigio/referee/v1/referee.proto", {
  includeDirs: [protos],
  keepCase: true, // proto field names, as the referee's JSON uses
  enums: String,
  defaults: true,
});
const { RefereeService } = grpc.loadPackageDefinition(definition).remigio.referee.v1;
const client = new RefereeService(process.argv[2], grpc.credentials.createInsecure());

function call(method, request) {
  return new Promise((resolve) => {
    const deadline = new Date(Date.now() + 30000);
    client[method](request, { deadline }, (error, reply) => {
      resolve(error ? { code: error.code, details: error.details } : { reply });
    });
  });
}

async function main() {
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const { method, request } = JSON.parse(line);
    process.stdout.write(JSON.stringify(await call(method, request)) + "\n");
  }
  client.close();
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack) + "\n");
  process.exit(1);
});
