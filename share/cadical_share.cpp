// CaDiCaL searches that export their short learnt clauses, for sudoku-batch's clause sharing.
//
// Why: python-sat's CaDiCaL has no way to read the clauses it learns; CaDiCaL's own C++ API has a
// Learner (every learnt clause up to a size, literal by literal) and a Terminator. `Search` is one
// solver with both connected: learnt clauses of at most `max_size` literals are buffered here (at
// most `max_buffered` literals; the rest counted as dropped) and handed to Python in one batch by
// `learnt()` (literals above `max_var` refused: CaDiCaL would allocate up to them); `solve_limited()` runs a
// conflict budget with the GIL released. Its methods are the subset of python-sat's `Solver` the race's SAT member
// calls, so the member can hold either, and `add_flat`: a whole block of clauses in one call, 20 times faster to
// load than python-sat's clause by clause, so the race's searches run here whenever this is python-sat's CaDiCaL.
#include <cadical.hpp>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

#if __has_include(<internal.hpp>)  // CaDiCaL's source tree (share/cadical.py's build): its counters are readable
#include <internal.hpp>
namespace CaDiCaL {
// CaDiCaL's public API counts nothing; its stand-alone `App` is the friend that reads the solver's counters. No
// App is linked here (libcadical.a holds none), so this file's one is that friend, reading and nothing else.
class App {
 public:
  static const Stats& counters(const Solver& solver) { return solver.internal->stats; }
};
}  // namespace CaDiCaL
#define SHARE_COUNTERS 1
#endif

namespace {

struct Export : CaDiCaL::Learner {
  int max_size = 0;
  size_t max_buffered = 0;
  std::vector<int> lits;  // buffered clauses, each closed by a 0
  int64_t learnt = 0, exported = 0, dropped = 0;

  bool learning(int size) override {
    ++learnt;
    if (size > max_size) return false;
    if (lits.size() + size + 1 > max_buffered) {
      ++dropped;
      return false;
    }
    ++exported;
    return true;
  }
  void learn(int lit) override { lits.push_back(lit); }
};

struct Stop : CaDiCaL::Terminator {
  std::atomic<bool> raised{false};
  bool terminate() override { return raised.load(std::memory_order_relaxed); }
};

class Search {
 public:
  Search(int max_size, int max_buffered, int max_var) : solver_(new CaDiCaL::Solver), max_var_(max_var) {
    if (max_size < 0 || max_buffered < 0 || max_var < 1) throw std::invalid_argument("sizes must be >= 0");
    export_.max_size = max_size;
    export_.max_buffered = static_cast<size_t>(max_buffered);
    solver_->connect_learner(&export_);
    solver_->connect_terminator(&stop_);
  }
  ~Search() { release(); }

  void configure(const std::map<std::string, int>& options) {
    auto& s = live();
    if (added_) throw std::invalid_argument("options are set before the first clause");
    for (const auto& [name, value] : options)
      if (!CaDiCaL::Solver::is_valid_option(name.c_str()) || !s.set(name.c_str(), value))
        throw std::invalid_argument("CaDiCaL " + std::string(CaDiCaL::Solver::version()) + " has no option " + name);
  }

  void add_clause(const std::vector<int>& lits) {
    auto& s = live();
    for (int lit : lits)  // checked first: a clause half added would be closed by the next one's literals
      if (lit == 0 || lit == INT32_MIN || std::abs(lit) > max_var_)  // a huge variable: CaDiCaL allocates up to it
        throw std::invalid_argument("a literal is a non-zero int of at most max_var");
    for (int lit : lits) s.add(lit);
    s.add(0);
    added_ = true;
    satisfied_ = false;
  }

  void append_formula(const py::iterable& clauses) {
    for (const auto& clause : clauses) add_clause(clause.cast<std::vector<int>>());
  }

  // Clauses as one int32 array, each closed by a 0: a block of a CNF in one call, with the GIL released (python-sat
  // takes a Python list a clause: ~1 us a clause, a 64x64 CNF's million clauses in a second).
  void add_flat(const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& flat) {
    auto& s = live();
    if (flat.ndim() != 1) throw std::invalid_argument("clauses come as one flat array");
    const int32_t* lits = flat.data();
    const py::ssize_t size = flat.shape(0);
    if (size == 0) return;
    if (lits[size - 1] != 0) throw std::invalid_argument("the last clause is not closed by a 0");
    for (py::ssize_t i = 0; i < size; ++i)  // checked first: nothing is added from a block with a bad literal
      if (lits[i] == INT32_MIN || std::abs(lits[i]) > max_var_)
        throw std::invalid_argument("a literal is an int of at most max_var");
    {
      py::gil_scoped_release free;
      for (py::ssize_t i = 0; i < size; ++i) s.add(lits[i]);
    }
    added_ = true;
    satisfied_ = false;
  }

  void conf_budget(int64_t conflicts) { budget_ = conflicts > INT32_MAX ? INT32_MAX : conflicts; }

  py::object solve_limited() {
    int answer;
    auto& s = live();
    {
      py::gil_scoped_release free;
      s.limit("conflicts", static_cast<int>(budget_));
      answer = s.solve();
    }
    budget_ = -1;
    satisfied_ = answer == 10;
    if (answer == 10) return py::bool_(true);
    if (answer == 20) return py::bool_(false);
    return py::none();
  }

  std::vector<int> get_model() {
    auto& s = live();
    std::vector<int> model;
    if (!satisfied_) return model;  // CaDiCaL aborts on `val` outside a satisfied state
    int vars = s.vars();
    model.reserve(vars);
    for (int v = 1; v <= vars; ++v) model.push_back(s.val(v) > 0 ? v : -v);
    return model;
  }

  // The clauses learnt since the last call (at most max_size literals each), the buffer emptied.
  std::vector<std::vector<int>> learnt() {
    std::vector<std::vector<int>> out;
    std::vector<int> clause;
    for (int lit : export_.lits) {
      if (lit) {
        clause.push_back(lit);
      } else {
        out.push_back(clause);
        clause.clear();
      }
    }
    export_.lits.clear();
    return out;
  }

  // python-sat's counters (conflicts, decisions, restarts, propagations) where the source tree is at hand, else
  // conflicts as the clauses learnt; and this search's exported and dropped clauses.
  std::map<std::string, int64_t> accum_stats() const {
    std::map<std::string, int64_t> out{
        {"conflicts", export_.learnt}, {"exported", export_.exported}, {"dropped", export_.dropped}};
#ifdef SHARE_COUNTERS
    if (solver_) {
      const auto& stats = CaDiCaL::App::counters(*solver_);
      out["conflicts"] = stats.conflicts;
      out["decisions"] = stats.decisions;
      out["restarts"] = stats.restarts;
      out["propagations"] = stats.propagations.search;
    }
#endif
    return out;
  }

  void interrupt() { stop_.raised = true; }
  void clear_interrupt() { stop_.raised = false; }

  void release() {
    if (solver_) {
      solver_->disconnect_learner();
      solver_->disconnect_terminator();
      solver_.reset();
    }
  }

 private:
  CaDiCaL::Solver& live() {
    if (!solver_) throw std::runtime_error("the search was deleted");
    return *solver_;
  }

  std::unique_ptr<CaDiCaL::Solver> solver_;
  Export export_;
  Stop stop_;
  int max_var_;
  int64_t budget_ = -1;
  bool added_ = false;
  bool satisfied_ = false;
};

}  // namespace

PYBIND11_MODULE(cadical_share, m) {
  m.doc() = "CaDiCaL searches exporting their short learnt clauses (sudoku-batch's clause sharing)";
  m.attr("CADICAL_VERSION") = CaDiCaL::Solver::version();
  py::class_<Search>(m, "Search")
      .def(py::init<int, int, int>(), py::arg("max_size"), py::arg("max_buffered") = 1 << 16,
           py::arg("max_var") = 1 << 24)
      .def("configure", &Search::configure)
      .def("add_clause", &Search::add_clause)
      .def("append_formula", &Search::append_formula)
      .def("add_flat", &Search::add_flat)
      .def("conf_budget", &Search::conf_budget)
      .def("solve_limited", &Search::solve_limited)
      .def("get_model", &Search::get_model)
      .def("learnt", &Search::learnt)
      .def("accum_stats", &Search::accum_stats)
      .def("interrupt", &Search::interrupt)
      .def("clear_interrupt", &Search::clear_interrupt)
      .def("delete", &Search::release);
}
