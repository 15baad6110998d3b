// RUN: stablehlo-translate --interpret -split-input-file %s
// The form of StableHLO's interpreter tests: functions of no parameters,
// each with its own checks, no @main, parts split at "// -----" (bare
// functions or modules of their own, pretty or generic). Expected values by
// hand.

func.func @add_op_test_f32() {
  %0 = stablehlo.constant dense<[0.0, 1.0, 2.5, -4.0]> : tensor<4xf32>
  %1 = stablehlo.constant dense<[1.0, 1.0, 1.0, 0.5]> : tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  check.expect_almost_eq_const %2, dense<[1.0, 2.0, 3.5, -3.5]> : tensor<4xf32>
  func.return
}

// -----

func.func @subtract_op_test_si32() {
  %0 = stablehlo.constant dense<[5, 7, -2]> : tensor<3xi32>
  %1 = stablehlo.constant dense<[1, 10, -2]> : tensor<3xi32>
  %2 = stablehlo.subtract %0, %1 : tensor<3xi32>
  check.expect_eq_const %2, dense<[4, -3, 0]> : tensor<3xi32>
  func.return
}

// -----

"builtin.module"() ({
  "func.func"() <{function_type = () -> (), sym_name = "sort_stable"}> ({
    %0 = "stablehlo.constant"() <{value = dense<[[1, 2, 3], [3, 2, 1], [1, 5, 1]]> : tensor<3x3xi32>}> : () -> tensor<3x3xi32>
    %1 = "stablehlo.constant"() <{value = dense<[[3, 2, 1], [1, 2, 3], [7, 8, 9]]> : tensor<3x3xi32>}> : () -> tensor<3x3xi32>
    %2:2 = "stablehlo.sort"(%0, %1) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>):
      %3 = "stablehlo.compare"(%arg0, %arg1) <{comparison_direction = #stablehlo<comparison_direction GT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
      "stablehlo.return"(%3) : (tensor<i1>) -> ()
    }) : (tensor<3x3xi32>, tensor<3x3xi32>) -> (tensor<3x3xi32>, tensor<3x3xi32>)
    "check.expect_eq_const"(%2#0) <{value = dense<[[3, 5, 3], [1, 2, 1], [1, 2, 1]]> : tensor<3x3xi32>}> : (tensor<3x3xi32>) -> ()
    "check.expect_eq_const"(%2#1) <{value = dense<[[1, 8, 1], [3, 2, 3], [7, 2, 9]]> : tensor<3x3xi32>}> : (tensor<3x3xi32>) -> ()
    "func.return"() : () -> ()
  }) : () -> ()
}) : () -> ()
