/**
 * ONNX `ModelProto` encoding with protobufjs reflection over an inline subset of `onnx.proto`
 * (field numbers from onnx/onnx.proto, IR version 10). Only what our graphs need: nodes,
 * typed inputs/outputs with static or symbolic dims, and tensor constants as attributes.
 */
import protobuf from "protobufjs";

const ONNX_PROTO = `
syntax = "proto2";
package onnx;
message AttributeProto {
  enum AttributeType { UNDEFINED = 0; FLOAT = 1; INT = 2; STRING = 3; TENSOR = 4; GRAPH = 5;
    FLOATS = 6; INTS = 7; STRINGS = 8; TENSORS = 9; GRAPHS = 10; }
  optional string name = 1;
  optional float f = 2;
  optional int64 i = 3;
  optional bytes s = 4;
  optional TensorProto t = 5;
  repeated float floats = 7;
  repeated int64 ints = 8;
  repeated bytes strings = 9;
  optional AttributeType type = 20;
}
message ValueInfoProto { optional string name = 1; optional TypeProto type = 2; }
message NodeProto {
  repeated string input = 1;
  repeated string output = 2;
  optional string name = 3;
  optional string op_type = 4;
  repeated AttributeProto attribute = 5;
  optional string domain = 7;
}
message ModelProto {
  optional int64 ir_version = 1;
  optional string producer_name = 2;
  optional string producer_version = 3;
  optional GraphProto graph = 7;
  repeated OperatorSetIdProto opset_import = 8;
}
message GraphProto {
  repeated NodeProto node = 1;
  optional string name = 2;
  repeated TensorProto initializer = 5;
  repeated ValueInfoProto input = 11;
  repeated ValueInfoProto output = 12;
}
message TensorProto {
  repeated int64 dims = 1;
  optional int32 data_type = 2;
  optional string name = 8;
  optional bytes raw_data = 9;
}
message TensorShapeProto {
  message Dimension { oneof value { int64 dim_value = 1; string dim_param = 2; } }
  repeated Dimension dim = 1;
}
message TypeProto {
  message Tensor { optional int32 elem_type = 1; optional TensorShapeProto shape = 2; }
  oneof value { Tensor tensor_type = 1; }
}
message OperatorSetIdProto { optional string domain = 1; optional int64 version = 2; }
`;

const root = protobuf.parse(ONNX_PROTO).root;
const ModelProto = root.lookupType("onnx.ModelProto");

/** ONNX `TensorProto.DataType` codes of the element types our graphs use. */
export const ONNX_DTYPE = {
  float32: 1,
  int32: 6,
  int64: 7,
  bool: 9,
  float64: 11,
} as const;

/** Element type of a graph value. */
export type DType = keyof typeof ONNX_DTYPE;

/** A dimension: a static size, or a symbolic name (`"B"`, `"P"`) resolved at run time. */
export type Dim = number | string;

/** Default ONNX opset of the graphs we emit (onnxruntime-node 1.30 loads ≤ 26). */
export const OPSET = 21;

/** Typed array holding a tensor's data for each dtype. */
export type TensorData = Float32Array | Float64Array | BigInt64Array | Int32Array | Uint8Array;

/** An ONNX attribute in protobufjs object form. */
export type Attribute = Record<string, unknown> & { name: string };

/** A node in protobufjs object form. */
export interface NodeObject {
  opType: string;
  name: string;
  input: string[];
  output: string[];
  attribute: Attribute[];
}

/** Little-endian raw bytes of a typed array (the layout `TensorProto.raw_data` expects). */
export function rawBytes(data: TensorData): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** A `TensorProto` object for a constant. */
export function tensorProto(
  data: TensorData,
  dims: number[],
  dtype: DType,
): Record<string, unknown> {
  return { dims, dataType: ONNX_DTYPE[dtype], rawData: new Uint8Array(rawBytes(data)) };
}

/** Integer attribute. */
export function intAttr(name: string, i: number): Attribute {
  return { name, i, type: 2 };
}
/** String attribute (UTF-8). */
export function stringAttr(name: string, s: string): Attribute {
  return { name, s: new TextEncoder().encode(s), type: 3 };
}
/** Integer-list attribute. */
export function intsAttr(name: string, ints: number[]): Attribute {
  return { name, ints, type: 7 };
}
/** Tensor attribute (e.g. `Constant.value`). */
export function tensorAttr(name: string, t: Record<string, unknown>): Attribute {
  return { name, t, type: 4 };
}

/** A `ValueInfoProto` object: name, element type and (static or symbolic) shape. */
export function valueInfo(
  name: string,
  dtype: DType,
  shape: readonly Dim[],
): Record<string, unknown> {
  const dim = shape.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d }));
  return { name, type: { tensorType: { elemType: ONNX_DTYPE[dtype], shape: { dim } } } };
}

/** Serialised ONNX model of one graph (IR 10, default domain at `opset`). */
export function encodeModel(
  graph: {
    name: string;
    node: NodeObject[];
    input: Record<string, unknown>[];
    output: Record<string, unknown>[];
  },
  opset = OPSET,
): Uint8Array {
  const msg = ModelProto.fromObject({
    irVersion: 10,
    producerName: "seed-engine",
    opsetImport: [{ domain: "", version: opset }],
    graph,
  });
  return ModelProto.encode(msg).finish();
}
