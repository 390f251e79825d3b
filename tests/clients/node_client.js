// A referee client in another language: Node.js with @grpc/grpc-js, the contract loaded from
// protos/ by @grpc/proto-loader (nothing generated). It makes the calls given as JSON lines on
// stdin ({"method": ..., "request": {...}}) against the address in argv[2], and prints one JSON
// line per call: {"reply": {...}} or {"code": N, "details": "..."}.
// Over TLS with `--tls-ca FILE` (the CA of the server's certificate); the API key, when the
// environment's REMIGIO_API_KEY holds one, goes with every call as `authorization: Bearer KEY`.
"use strict";

const fs = require("fs");
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

function credentials(args) {
  const at = args.indexOf("--tls-ca");
  if (at < 0) return grpc.credentials.createInsecure();
  const tls = grpc.credentials.createSsl(fs.readFileSync(args[at + 1]));
  const key = process.env.REMIGIO_API_KEY;
  if (!key) return tls;
  const bearer = grpc.credentials.createFromMetadataGenerator((_params, done) => {
    const metadata = new grpc.Metadata();
    metadata.add("authorization", `Bearer ${key}`);
    done(null, metadata);
  });
  return grpc.credentials.combineChannelCredentials(tls, bearer);
}

const client = new RefereeService(process.argv[2], credentials(process.argv.slice(3)));

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
