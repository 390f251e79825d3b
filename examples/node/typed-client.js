// @ts-check
// A typed Node.js client of the referee: the messages and the service generated from the proto by
// protoc-gen-es (`make clients` writes gen/: JavaScript with TypeScript declarations, so an editor
// or tsc checks every field), sent with @grpc/grpc-js. Install its packages once, then run it
// from any directory:
//   npm install --prefix examples/node
//   node examples/node/typed-client.js [HOST:PORT]
"use strict";

const grpc = require("@grpc/grpc-js");
const { create, fromBinary, toBinary } = require("@bufbuild/protobuf");
const { CloseKind, RefereeService } = require("./gen/remigio/referee/v1/referee_pb.js");

const referee = new grpc.Client(process.argv[2] || "127.0.0.1:50051", grpc.credentials.createInsecure());

/**
 * One unary call of the generated service, with a 5-second deadline: the request as the method's
 * input message (or its fields), the reply as its output message.
 * @template {import("@bufbuild/protobuf").DescMessage} I
 * @template {import("@bufbuild/protobuf").DescMessage} O
 * @param {import("@bufbuild/protobuf").DescMethodUnary<I, O>} method
 * @param {import("@bufbuild/protobuf").MessageInitShape<I>} request
 * @returns {Promise<import("@bufbuild/protobuf").MessageShape<O>>}
 */
function call(method, request) {
  return new Promise((resolve, reject) => {
    referee.makeUnaryRequest(
      `/${method.parent.typeName}/${method.name}`,
      (message) => Buffer.from(toBinary(method.input, message)),
      (bytes) => fromBinary(method.output, bytes),
      create(method.input, request),
      { deadline: new Date(Date.now() + 5000) },
      (error, reply) => (error || !reply ? reject(error) : resolve(reply)),
    );
  });
}

(async () => {
  const solved = await call(RefereeService.method.solveHand, { cards: "AH 2H 3H 5C 5D 5S KS KD 9C JK".split(" ") });
  console.log(solved.linking?.points); // 9
  const checked = await call(RefereeService.method.checkClose, {
    cards: "3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split(" "),
    claimedKind: CloseKind.REMIGIO,
  });
  const close = checked.close;
  console.log(close?.valid, close && CloseKind[close.kind], close?.multiplier); // true STRAIGHT_FLUSH 5
  const [claim] = checked.claims;
  console.log(claim.field, claim.expected); // claimed_kind STRAIGHT_FLUSH
})()
  .catch((error) => { console.error(error.details || error.message); process.exitCode = 1; })
  .finally(() => referee.close());
