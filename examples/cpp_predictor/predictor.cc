// predictor: runs a saved Caffe2 init/predict net pair with caffe2::Predictor, no Python.
//
//   predictor INIT_NET PREDICT_NET OUT_DIR [BLOB=FILE.npy ...]
//
// Reads both nets (binary or text NetDef), runs the init net, feeds each BLOB from its .npy file
// (C order; float32, float64, int32, int64, uint8, int8, int16, uint16, bool), runs the predict net
// once and writes every declared output to OUT_DIR/<blob>.npy ('/' in a blob name as %2F), printing one
// line per output.
// Exit 0: done; 1: Caffe2 refused to create or run the nets (its message on stderr); 2: bad
// command line or input file. Output names come from the created net (NetBase::external_output):
// the torch wheel's library does not export protobuf's code for NetDef's repeated string fields.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "caffe2/core/init.h"
#include "caffe2/core/net.h"
#include "caffe2/core/workspace.h"
#include "caffe2/predictor/predictor.h"
#include "caffe2/utils/proto_utils.h"

namespace {

struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct NpyType {
  const char* descr;  // numpy's dtype string, little-endian where it matters
  caffe2::TypeMeta meta;
};

const std::vector<NpyType>& npy_types() {
  static const std::vector<NpyType> types = {
      {"<f4", caffe2::TypeMeta::Make<float>()},   {"<f8", caffe2::TypeMeta::Make<double>()},
      {"<i4", caffe2::TypeMeta::Make<int32_t>()}, {"<i8", caffe2::TypeMeta::Make<int64_t>()},
      {"|u1", caffe2::TypeMeta::Make<uint8_t>()}, {"|i1", caffe2::TypeMeta::Make<int8_t>()},
      {"<i2", caffe2::TypeMeta::Make<int16_t>()}, {"<u2", caffe2::TypeMeta::Make<uint16_t>()},
      {"|b1", caffe2::TypeMeta::Make<bool>()},
  };
  return types;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw BadInput("cannot read " + path);
  }
  std::ostringstream data;
  data << in.rdbuf();
  return data.str();
}

// The value of 'key' in a .npy header dict: the text after "'key':" up to the next top-level comma.
std::string header_field(const std::string& header, const std::string& key, const std::string& path) {
  const std::string quoted = "'" + key + "':";
  const size_t at = header.find(quoted);
  if (at == std::string::npos) {
    throw BadInput(path + ": .npy header has no '" + key + "'");
  }
  size_t start = header.find_first_not_of(' ', at + quoted.size());
  size_t end = start;
  int depth = 0;
  while (end < header.size() && (depth > 0 || (header[end] != ',' && header[end] != '}'))) {
    depth += header[end] == '(' ? 1 : header[end] == ')' ? -1 : 0;
    ++end;
  }
  return header.substr(start, end - start);
}

caffe2::TensorCPU read_npy(const std::string& path) {
  const std::string data = read_file(path);
  if (data.size() < 10 || data.compare(0, 6, "\x93NUMPY") != 0) {
    throw BadInput(path + ": not a .npy file");
  }
  const int major = static_cast<unsigned char>(data[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(data[8]) | (static_cast<unsigned char>(data[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) throw BadInput(path + ": truncated .npy header");
    for (int i = 0; i < 4; ++i) header_len |= size_t(static_cast<unsigned char>(data[8 + i])) << (8 * i);
    offset = 12;
  } else {
    throw BadInput(path + ": unknown .npy version " + std::to_string(major));
  }
  if (data.size() < offset + header_len) throw BadInput(path + ": truncated .npy header");
  const std::string header = data.substr(offset, header_len);
  std::string descr = header_field(header, "descr", path);
  descr = descr.substr(1, descr.size() - 2);  // strip the quotes
  if (descr == "<b1") descr = "|b1";
  if (header_field(header, "fortran_order", path) != "False") {
    throw BadInput(path + ": Fortran-ordered arrays are not read; save a C-ordered array");
  }
  std::string shape_text = header_field(header, "shape", path);
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (size_t i = 0; i < shape_text.size();) {
    if (isdigit(static_cast<unsigned char>(shape_text[i]))) {
      size_t used = 0;
      dims.push_back(std::stoll(shape_text.substr(i), &used));
      count *= dims.back();
      i += used;
    } else {
      ++i;
    }
  }
  const NpyType* type = nullptr;
  for (const auto& candidate : npy_types()) {
    if (descr == candidate.descr) type = &candidate;
  }
  if (type == nullptr) throw BadInput(path + ": unsupported .npy dtype '" + descr + "'");
  const size_t nbytes = static_cast<size_t>(count) * type->meta.itemsize();
  if (data.size() != offset + header_len + nbytes) {
    throw BadInput(path + ": holds " + std::to_string(data.size() - offset - header_len) + " data bytes, its header says " +
                   std::to_string(nbytes));
  }
  caffe2::TensorCPU tensor(dims, caffe2::CPU);
  void* target = tensor.raw_mutable_data(type->meta);
  if (nbytes > 0) std::memcpy(target, data.data() + offset + header_len, nbytes);
  return tensor;
}

void write_npy(const std::string& path, const caffe2::TensorCPU& tensor) {
  const NpyType* type = nullptr;
  for (const auto& candidate : npy_types()) {
    if (tensor.dtype() == candidate.meta) type = &candidate;
  }
  if (type == nullptr) {
    throw std::runtime_error("output has dtype " + std::string(tensor.dtype().name()) + ", which .npy writing does not support");
  }
  std::string shape = "(";
  for (const auto dim : tensor.sizes()) shape += std::to_string(dim) + ", ";
  if (tensor.dim() > 1) shape.resize(shape.size() - 2);  // (2, 3); a 1-d shape keeps its comma: (4,)
  if (tensor.dim() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = "{'descr': '" + std::string(type->descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(path + ".tmp", std::ios::binary);
  const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.write(magic, sizeof(magic));
  const unsigned char length[] = {static_cast<unsigned char>(header.size() & 0xff),
                                  static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(length), 2);
  out << header;
  out.write(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
  out.close();
  if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    throw BadInput("cannot write " + path);
  }
}

caffe2::NetDef read_net(const std::string& path) {
  read_file(path);  // a missing file is bad input, not a Caffe2 failure
  caffe2::NetDef net;
  if (!caffe2::ReadProtoFromFile(path, &net)) throw BadInput(path + ": not a Caffe2 NetDef (binary or text)");
  return net;
}

// Caffe2's message on one line, without the operator it appends (already named in the message).
std::string one_line(std::string text) {
  for (const char* tail : {" (Error from operator:", " Operator def:"}) {
    const size_t at = text.find(tail);
    if (at != std::string::npos) text.resize(at);
  }
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return text;
}

int run(int argc, char** argv) {
  if (argc < 4) {
    throw BadInput("usage: predictor INIT_NET PREDICT_NET OUT_DIR [BLOB=FILE.npy ...]");
  }
  const caffe2::NetDef init_net = read_net(argv[1]);
  const caffe2::NetDef predict_net = read_net(argv[2]);
  const std::string out_dir = argv[3];
  caffe2::Predictor::TensorMap inputs;
  for (int i = 4; i < argc; ++i) {
    const std::string pair = argv[i];
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size()) {
      throw BadInput("expected BLOB=FILE.npy, got '" + pair + "'");
    }
    inputs.emplace(pair.substr(0, eq), read_npy(pair.substr(eq + 1)));
  }
  caffe2::Predictor predictor(init_net, predict_net, nullptr, true, /*optimization=*/0);
  caffe2::Predictor::TensorList outputs;
  if (!predictor(inputs, &outputs)) throw std::runtime_error("the predict net failed to run");
  caffe2::NetBase* net = predictor.ws()->GetNet(predictor.def().name());
  if (net == nullptr) throw std::runtime_error("the predictor holds no net named '" + predictor.def().name() + "'");
  const std::vector<std::string>& names = net->external_output();
  for (size_t i = 0; i < names.size() && i < outputs.size(); ++i) {
    std::string file = names[i];  // a name scope's '/' would name a directory
    for (size_t at = file.find('/'); at != std::string::npos; at = file.find('/', at + 3)) file.replace(at, 1, "%2F");
    write_npy(out_dir + "/" + file + ".npy", outputs[i]);
    std::cout << names[i] << " " << outputs[i].dtype().name() << " " << outputs[i].sizes() << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Caffe2's initialisation, quietly: it logs an error for every CPU feature the wheel was built without.
  const int log_level = FLAGS_caffe2_log_level;
  int init_argc = 2;
  char quiet[] = "--caffe2_log_level=3";
  char* init_args[] = {argv[0], quiet, nullptr};
  char** init_argv = init_args;
  caffe2::GlobalInit(&init_argc, &init_argv);
  FLAGS_caffe2_log_level = log_level;
  try {
    return run(argc, argv);
  } catch (const BadInput& error) {
    std::cerr << "predictor: error: " << error.what() << std::endl;
    return 2;
  } catch (const c10::Error& error) {
    std::cerr << "predictor: Caffe2 error: " << one_line(error.what_without_backtrace()) << std::endl;
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "predictor: error: " << error.what() << std::endl;
    return 1;
  }
}
