import Foundation

/// The C that joins a module translated by `wasm2c` (wabt 1.0.32) to
/// gatewayd, written from the header wasm2c made for it: each import
/// forwards its arguments to one host entry (`gw_host_t`, a Swift
/// function) by its index; `gw_invoke` runs an export by its index under a
/// trap handler that nests (a host function may call back into the guest,
/// as handing it a value does); `gw_new` instantiates with the memory
/// capped at `max_pages`. Generated: the header names every C symbol, so
/// no mangling rule of wasm2c's is repeated here.
struct CompiledGlue {
    struct Function {
        let module: String
        let name: String
        let symbol: String
        /// An import's first parameter: the struct of the module it comes from.
        let owner: String
        /// "u32", "u64" or "void".
        let result: String
        let parameters: [String]
    }

    var imports: [Function] = []
    var exports: [Function] = []
    /// The imported modules' instance structs, in `instantiate`'s order.
    var importStructs: [String] = []
    let prefix: String

    struct Unsupported: Error, CustomStringConvertible {
        let description: String
    }

    /// `prefix`: the module name given to wasm2c (`-n`).
    init(header: String, prefix: String) throws(Unsupported) {
        self.prefix = prefix
        let lines = header.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for (index, line) in lines.enumerated() where index + 1 < lines.count {
            let prototype = lines[index + 1]
            if line.hasPrefix("/* import: '") {
                let names = Self.quoted(line)
                guard names.count == 2, let function = Self.function(prototype, module: names[0], name: names[1]) else {
                    throw Unsupported(description: "an import wasm2c wrote as `\(prototype)` (only functions of i32 and i64 are provided)")
                }
                imports.append(function)
            } else if line.hasPrefix("/* export: '"), let name = Self.quoted(line).first,
                      let function = Self.function(prototype, module: "", name: name) {
                exports.append(function)
            } else if line.hasPrefix("void Z_\(prefix)_instantiate(") {
                importStructs = Self.parameters(line).dropFirst().map(Self.structName)
            }
        }
        guard header.contains("wasm_rt_memory_t* Z_\(prefix)Z_memory(") else { throw Unsupported(description: "exports no memory") }
    }

    /// The glue's C source.
    var source: String {
        var c = """
        #define _GNU_SOURCE
        #include <pthread.h>
        #include <time.h>
        #include <stdint.h>
        #include <stdlib.h>
        #include <string.h>
        #include "module.h"
        #include "wasm-rt-impl.h"

        typedef int (*gw_host_t)(void *vm, uint32_t import, const uint64_t *args, uint32_t count, uint64_t *result);

        """
        for name in Set(importStructs).sorted() { c += "struct \(name) { void *vm; gw_host_t host; };\n" }
        c += "typedef struct { Z_\(prefix)_instance_t guest;"
        for (index, name) in importStructs.enumerated() { c += " struct \(name) env\(index);" }
        c += " } gw_instance;\n\n"
        for (index, function) in imports.enumerated() {
            let parameters = function.parameters.enumerated().map { "\($1) a\($0)" }
            c += "\(function.result) \(function.symbol)(struct \(function.owner) *m\(parameters.map { ", " + $0 }.joined())) {\n"
            c += "  uint64_t args[\(max(1, parameters.count))] = {\(parameters.indices.map { "a\($0)" }.joined(separator: ", "))}, r = 0;\n"
            c += "  if (m->host(m->vm, \(index), args, \(parameters.count), &r)) wasm_rt_trap(WASM_RT_TRAP_UNREACHABLE);\n"
            c += function.result == "void" ? "  (void)r;\n}\n" : "  return (\(function.result))r;\n}\n"
        }
        c += "\nconst uint32_t gw_import_count = \(imports.count);\n"
        c += "const char *const gw_import_names[] = {\(imports.map { "\"\($0.module)\", \"\($0.name)\"" }.joined(separator: ", "))\(imports.isEmpty ? "0" : "")};\n"
        c += "const uint32_t gw_export_count = \(exports.count);\n"
        c += "const char *const gw_export_names[] = {\(exports.map { "\"\($0.name)\"" }.joined(separator: ", "))\(exports.isEmpty ? "0" : "")};\n"
        c += "const uint8_t gw_export_arity[] = {\(exports.map { "\($0.parameters.count)" }.joined(separator: ", "))\(exports.isEmpty ? "0" : "")};\n\n"
        c += """
        /* Traps unwind to the innermost call: the outer call's target is kept and restored. */
        #define GW_TRY(trap, body) do { \\
            jmp_buf saved; memcpy(saved, wasm_rt_jmp_buf, sizeof saved); \\
            uint32_t depth = wasm_rt_saved_call_stack_depth; \\
            trap = wasm_rt_impl_try(); \\
            if (trap == 0) { body; } \\
            memcpy(wasm_rt_jmp_buf, saved, sizeof saved); wasm_rt_saved_call_stack_depth = depth; \\
        } while (0)

        /* The lowest frame address a guest function may have on this thread (see RuntimePatch). */
        _Thread_local uintptr_t gw_stack_limit;

        static void gw_set_stack_limit(void) {
          pthread_attr_t attributes;
          void *low; size_t size;
          if (pthread_getattr_np(pthread_self(), &attributes) != 0) return;
          if (pthread_attr_getstack(&attributes, &low, &size) == 0) gw_stack_limit = (uintptr_t)low + (1u << 20);
          pthread_attr_destroy(&attributes);
        }

        /* The callback's deadline (0: none), set by the outermost invoke; nested ones (the allocator) share it. */
        _Thread_local int64_t gw_ticks;
        static _Thread_local uint64_t gw_deadline;
        static _Thread_local int gw_depth;

        static uint64_t gw_now(void) {
          struct timespec t;
          clock_gettime(CLOCK_MONOTONIC, &t);
          return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
        }

        int gw_out_of_time(void) {
          gw_ticks = 4096;
          return gw_deadline != 0 && gw_now() > gw_deadline;
        }

        int gw_invoke(gw_instance *i, uint32_t export, const uint64_t *a, uint64_t *result, uint64_t budget_ns) {
          if (!gw_stack_limit) gw_set_stack_limit();
          if (gw_depth == 0) { gw_deadline = budget_ns ? gw_now() + budget_ns : 0; gw_ticks = 4096; }
          gw_depth++;
          int trap;
          GW_TRY(trap, switch (export) {

        """
        for (index, function) in exports.enumerated() {
            let arguments = (["&i->guest"] + function.parameters.enumerated().map { "(\($1))a[\($0)]" }).joined(separator: ", ")
            c += function.result == "void" ? "    case \(index): \(function.symbol)(\(arguments)); break;\n"
                : "    case \(index): *result = \(function.symbol)(\(arguments)); break;\n"
        }
        c += """
            default: break;
          });
          gw_depth--;
          return trap;
        }

        static int gw_initialized;

        gw_instance *gw_new(void *vm, gw_host_t host, uint32_t max_pages, uint64_t budget_ns, int *trap) {
          if (!gw_initialized) { wasm_rt_init(); Z_\(prefix)_init_module(); gw_initialized = 1; }
          gw_instance *i = calloc(1, sizeof *i);
          if (!i) { *trap = -1; return 0; }

        """
        for index in importStructs.indices { c += "  i->env\(index).vm = vm; i->env\(index).host = host;\n" }
        let environments = importStructs.indices.map { ", &i->env\($0)" }.joined()
        c += """
          if (!gw_stack_limit) gw_set_stack_limit();
          if (gw_depth == 0) { gw_deadline = gw_now() + budget_ns; gw_ticks = 4096; }
          gw_depth++;
          int t;
          GW_TRY(t, Z_\(prefix)_instantiate(&i->guest\(environments)));
          gw_depth--;
          *trap = t;
          if (t) return i;
          wasm_rt_memory_t *memory = Z_\(prefix)Z_memory(&i->guest);
          if (memory->max_pages > max_pages) memory->max_pages = max_pages;
          if (memory->pages > max_pages) *trap = -2;
          return i;
        }

        uint8_t *gw_memory(gw_instance *i, uint64_t *size) {
          wasm_rt_memory_t *memory = Z_\(prefix)Z_memory(&i->guest);
          *size = memory->size;
          return memory->data;
        }

        void gw_free(gw_instance *i) { Z_\(prefix)_free(&i->guest); free(i); }

        """
        return c
    }

    private static func quoted(_ line: String) -> [String] {
        line.split(separator: "'", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    private static func parameters(_ prototype: String) -> [String] {
        guard let open = prototype.firstIndex(of: "("), let close = prototype.lastIndex(of: ")") else { return [] }
        return prototype[prototype.index(after: open)..<close].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    /// `u32 Z_envZ_proxy_log(struct Z_env_instance_t*, u32, u32, u32);`, or nil for other types.
    private static func function(_ prototype: String, module: String, name: String) -> Function? {
        let head = prototype.prefix { $0 != "(" }.split(separator: " ")
        guard head.count == 2, ["u32", "u64", "void"].contains(head[0]) else { return nil }
        let all = Self.parameters(prototype)
        let parameters = Array(all.dropFirst())
        guard !all.isEmpty, parameters.allSatisfy({ $0 == "u32" || $0 == "u64" }) else { return nil }
        return Function(module: module, name: name, symbol: String(head[1]), owner: structName(all[0]), result: String(head[0]), parameters: parameters)
    }

    /// `struct Z_env_instance_t*` -> `Z_env_instance_t`.
    private static func structName(_ parameter: String) -> String {
        parameter.replacingOccurrences(of: "struct ", with: "").replacingOccurrences(of: "*", with: "").trimmingCharacters(in: .whitespaces)
    }
}
