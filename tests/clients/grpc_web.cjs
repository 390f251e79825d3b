// A gRPC-Web client of the gateway in Node.js: Connect's web transport (fetch), the messages and
// the service made at run time from the gateway's descriptor set (nothing generated).
//   node tests/clients/grpc_web.cjs http://127.0.0.1:8080 referee.binpb
// prints one JSON line: the points of a hand, and an INVALID_ARGUMENT with its BadRequest.
const fs = require("fs");
const { createFileRegistry, fromBinary } = require("@bufbuild/protobuf");
const { FileDescriptorSetSchema } = require("@bufbuild/protobuf/wkt");
const { Code, ConnectError, createClient } = require("@connectrpc/connect");
const { createGrpcWebTransport } = require("@connectrpc/connect-web");

const [baseUrl, descriptorSet] = process.argv.slice(2);
const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, fs.readFileSync(descriptorSet)));
const referee = createClient(
  registry.getService("remigio.referee.v1.RefereeService"),
  createGrpcWebTransport({ baseUrl, useBinaryFormat: true }),
);

(async () => {
  const out = {};
  const solved = await referee.solveHand({ cards: "AH 2H 3H 5C 5D 5S KS KD 9C JK".split(" ") });
  out.points = solved.linking.points;
  try {
    await referee.solveHand({ cards: ["ZZ"] });
  } catch (caught) {
    const error = ConnectError.from(caught);
    const [badRequest] = error.findDetails(registry.getMessage("google.rpc.BadRequest"));
    out.error = { code: Code[error.code], message: error.rawMessage, field: badRequest.fieldViolations[0].field };
  }
  console.log(JSON.stringify(out));
})().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
