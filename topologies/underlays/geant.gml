graph [
  DateObtained "29/03/2012"
  GeoLocation "Europe"
  GeoExtent "Continent"
  Network "GEANT"
  Provenance "Primary"
  Access 0
  Source "http://www.geant.net/Media_Centre/Media_Library/Pages/Maps.aspx"
  Version "1.0"
  Type "REN"
  DateType "Current"
  Backbone 1
  Commercial 0
  label "Geant2012"
  ToolsetVersion "0.3.34dev-20120328"
  Customer 0
  IX 0
  SourceGitVersion "e278b1b"
  DateModifier "="
  DateMonth "03"
  LastAccess "3/08/29/03/2012"
  Layer "IP"
  Creator "Topology Zoo Toolset"
  Developed 1
  Transit 1
  NetworkDate "2012_03"
  DateYear "2012"
  LastProcessed "2012_03_29"
  Testbed 1
  node [
    id 0
    label "NL"
    Country "Netherlands"
    Longitude 4.88969
    Internal 1
    Latitude 52.37403
  ]
  node [
    id 1
    label "BE"
    Country "Belgium"
    Longitude 4.34878
    Internal 1
    Latitude 50.85045
  ]
  node [
    id 2
    label "DK"
    Country "Denmark"
    Longitude 12.56553
    Internal 1
    Latitude 55.67594
    type "NORDUNet"
  ]
  node [
    id 3
    label "PL"
    Country "Poland"
    Longitude 16.96667
    Internal 1
    Latitude 52.41667
  ]
  node [
    id 4
    label "DE"
    Country "Germany"
    Longitude 8.68333
    Internal 1
    Latitude 50.11667
  ]
  node [
    id 5
    label "CZ"
    Country "Czech Republic"
    Longitude 14.42076
    Internal 1
    Latitude 50.08804
  ]
  node [
    id 6
    label "LU"
    Country "Luxembourg"
    Longitude 6.13
    Internal 1
    Latitude 49.61167
  ]
  node [
    id 7
    label "FR"
    Country "France"
    Longitude 2.3488
    Internal 1
    Latitude 48.85341
  ]
  node [
    id 8
    label "CH"
    Country "Switzerland"
    Longitude 7.44744
    Internal 1
    Latitude 46.94809
  ]
  node [
    id 9
    label "IT"
    Country "Italy"
    Longitude 9.18951
    Internal 1
    Latitude 45.46427
  ]
  node [
    id 10
    label "UA"
    Latitude 48.3794
    Longitude 31.1656
    Internal 1
  ]
  node [
    id 11
    label "MD"
    Latitude 47.4116
    Longitude 28.3699
    Internal 1
  ]
  node [
    id 12
    label "BG"
    Country "Bulgaria"
    Longitude 23.32415
    Internal 1
    Latitude 42.69751
  ]
  node [
    id 13
    label "RO"
    Country "Romania"
    Longitude 26.10626
    Internal 1
    Latitude 44.43225
  ]
  node [
    id 14
    label "TR"
    geocodecountry "Turkey"
    Country "Turkey"
    Longitude 34.91155
    Internal 1
    Latitude 39.05901
  ]
  node [
    id 15
    label "GR"
    Country "Greece"
    Longitude 23.71622
    Internal 1
    Latitude 37.97945
  ]
  node [
    id 16
    label "CY"
    Country "Cyprus"
    Longitude 33.36667
    Internal 1
    Latitude 35.16667
  ]
  node [
    id 17
    label "IL"
    geocodecountry "Israel"
    Country "Israel"
    Longitude 34.75
    Internal 1
    Latitude 31.5
  ]
  node [
    id 18
    label "MT"
    Country "Malta"
    Longitude 14.42556
    Internal 1
    Latitude 35.90917
  ]
  node [
    id 19
    label "BY"
    Latitude 53.7098
    Longitude 27.9534
    Internal 1
  ]
  node [
    id 20
    label "MK"
    Country "Macedonia"
    Longitude 21.43333
    Internal 1
    Latitude 42.0
  ]
  node [
    id 21
    label "ME"
    Country "Montenegro"
    Longitude 19.26361
    Internal 1
    Latitude 42.44111
  ]
  node [
    id 22
    label "HU"
    Country "Hungary"
    Longitude 19.03991
    Internal 1
    Latitude 47.49801
  ]
  node [
    id 23
    label "SK"
    Country "Slovakia"
    Longitude 17.10674
    Internal 1
    Latitude 48.14816
  ]
  node [
    id 24
    label "PT"
    Country "Portugal"
    Longitude -9.13333
    Internal 1
    Latitude 38.71667
  ]
  node [
    id 25
    label "ES"
    Country "Spain"
    Longitude -3.70256
    Internal 1
    Latitude 40.4165
  ]
  node [
    id 26
    label "RS"
    Country "Serbia"
    Longitude 20.46513
    Internal 1
    Latitude 44.80401
  ]
  node [
    id 27
    label "HR"
    Country "Croatia"
    Longitude 15.97798
    Internal 1
    Latitude 45.81444
  ]
  node [
    id 28
    label "SL"
    Country "Slovenia"
    Longitude 14.50513
    Internal 1
    Latitude 46.05108
  ]
  node [
    id 29
    label "AT"
    Country "Austria"
    Longitude 16.37208
    Internal 1
    Latitude 48.20849
  ]
  node [
    id 30
    label "LT"
    Country "Lithuania"
    Longitude 23.9
    Internal 1
    Latitude 54.9
  ]
  node [
    id 31
    label "RU"
    Country "Russia"
    Longitude 37.61556
    Internal 1
    geocodeid "524901"
    Latitude 55.75222
  ]
  node [
    id 32
    label "IS"
    Country "Iceland"
    Longitude -21.89541
    Internal 1
    Latitude 64.13548
    type "NORDUNet"
  ]
  node [
    id 33
    label "IE"
    Country "Ireland"
    Longitude -6.26719
    Internal 1
    Latitude 53.34399
  ]
  node [
    id 34
    label "UK"
    Country "United Kingdom"
    Longitude -0.12574
    Internal 1
    Latitude 51.50853
  ]
  node [
    id 35
    label "NO"
    geocodecountry "Norway"
    Country "Norway"
    Longitude 10.0
    Internal 1
    Latitude 62.0
    type "NORDUNet"
  ]
  node [
    id 36
    label "SE"
    Country "Sweden"
    Longitude 18.0649
    Internal 1
    Latitude 59.33258
    type "NORDUNet"
  ]
  node [
    id 37
    label "FI"
    Country "Finland"
    Longitude 22.26869
    Internal 1
    Latitude 60.45148
    type "NORDUNet"
  ]
  node [
    id 38
    label "EE"
    Country "Estonia"
    Longitude 24.75353
    Internal 1
    Latitude 59.43696
  ]
  node [
    id 39
    label "LV"
    Country "Latvia"
    Longitude 24.10589
    Internal 1
    Latitude 56.946
  ]
  edge [
    source 0
    target 1
    id "e59"
    distance 179.32598576708145
  ]
  edge [
    source 0
    target 2
    id "e5"
    distance 923.3283011552757
  ]
  edge [
    source 0
    target 4
    id "e6"
    distance 488.11815972118796
  ]
  edge [
    source 0
    target 34
    LinkSpeed "2.5"
    LinkLabel "2.5 Gbps"
    LinkSpeedUnits "G"
    capacity 2500000000.0
    distance 562.878102261553
  ]
  edge [
    source 0
    target 30
    LinkSpeed "2.5"
    LinkLabel "2.5 Gbps"
    LinkSpeedUnits "G"
    capacity 2500000000.0
    distance 2120.9001112398582
  ]
  edge [
    source 1
    target 33
    id "e9"
    distance 1206.162441719578
  ]
  edge [
    source 2
    target 32
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 3922.267951099039
  ]
  edge [
    source 2
    target 35
    id "e4"
    distance 746.4478692255708
  ]
  edge [
    source 2
    target 4
    id "e8"
    distance 744.50177773082
  ]
  edge [
    source 2
    target 38
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 1405.9658170444022
  ]
  edge [
    source 2
    target 36
    id "e3"
    distance 724.1228605813056
  ]
  edge [
    source 2
    target 31
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 2775.192341131577
  ]
  edge [
    source 3
    target 10
    LinkSpeed "1"
    LinkLabel "1 Gbps"
    LinkSpeedUnits "G"
    capacity 1000000000.0
    distance 1625.0004984731004
  ]
  edge [
    source 3
    target 19
    LinkSpeed "1"
    LinkLabel "1 Gbps"
    LinkSpeedUnits "G"
    capacity 1000000000.0
    distance 1223.883834642013
  ]
  edge [
    source 3
    target 4
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 949.7334328522467
  ]
  edge [
    source 3
    target 5
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 376.3808960627175
  ]
  edge [
    source 3
    target 30
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 810.0895626557102
  ]
  edge [
    source 4
    target 5
    id "e7"
    distance 634.6803107676633
  ]
  edge [
    source 4
    target 6
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 287.8300524860265
  ]
  edge [
    source 4
    target 8
    id "e14"
    distance 375.04507847481915
  ]
  edge [
    source 4
    target 16
    LinkSpeed "1"
    LinkLabel "1 Gbps"
    LinkSpeedUnits "G"
    capacity 1000000000.0
    distance 3135.2058222351147
  ]
  edge [
    source 4
    target 17
    LinkSpeed "2.5"
    LinkLabel "2.5 Gbps"
    LinkSpeedUnits "G"
    capacity 2500000000.0
    distance 3455.881170725865
  ]
  edge [
    source 4
    target 29
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 875.4676461493866
  ]
  edge [
    source 4
    target 31
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 3254.451144840306
  ]
  edge [
    source 5
    target 23
    id "e21"
    distance 362.68818655213397
  ]
  edge [
    source 6
    target 7
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 426.51444028372026
  ]
  edge [
    source 7
    target 8
    id "e11"
    distance 602.102271170958
  ]
  edge [
    source 7
    target 25
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 1152.7716506165455
  ]
  edge [
    source 7
    target 34
    id "e10"
    distance 402.71878445334073
  ]
  edge [
    source 8
    target 9
    id "e13"
    distance 252.65690705482768
  ]
  edge [
    source 8
    target 25
    id "e12"
    distance 1430.6012008611224
  ]
  edge [
    source 9
    target 25
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 1531.6993098274625
  ]
  edge [
    source 9
    target 18
    LinkSpeed "1"
    LinkLabel "1 Gbps"
    LinkSpeedUnits "G"
    capacity 1000000000.0
    distance 1191.1601347666535
  ]
  edge [
    source 9
    target 29
    id "e15"
    distance 848.5573740458495
  ]
  edge [
    source 9
    target 15
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 1794.1662151839357
  ]
  edge [
    source 11
    target 13
    LinkSpeed "1"
    LinkLabel "1 Gbps"
    LinkSpeedUnits "G"
    capacity 1000000000.0
    distance 387.25728075250765
  ]
  edge [
    source 12
    target 22
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 687.986874215336
  ]
  edge [
    source 12
    target 20
    LinkSpeed "155"
    LinkLabel "155 Mbps"
    LinkSpeedUnits "M"
    capacity 155000000.0
    distance 221.35875653078634
  ]
  edge [
    source 12
    target 13
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 354.63731595186334
  ]
  edge [
    source 12
    target 14
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 1331.957399795769
  ]
  edge [
    source 12
    target 15
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 483.7636509513421
  ]
  edge [
    source 13
    target 14
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 1103.5491555418946
  ]
  edge [
    source 13
    target 22
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 843.5354377402058
  ]
  edge [
    source 15
    target 29
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 1343.0136797578718
  ]
  edge [
    source 16
    target 34
    LinkSpeed "1"
    LinkLabel "1 Gbps"
    LinkSpeedUnits "G"
    capacity 1000000000.0
    distance 4083.144703890609
  ]
  edge [
    source 17
    target 30
    LinkSpeed "2.5"
    LinkLabel "2.5 Gbps"
    LinkSpeedUnits "G"
    capacity 2500000000.0
    distance 2562.1917052859303
  ]
  edge [
    source 21
    target 27
    LinkSpeed "155"
    LinkLabel "155 Mbps"
    LinkSpeedUnits "M"
    capacity 155000000.0
    distance 510.25099169159955
  ]
  edge [
    source 22
    target 26
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 323.43586247076826
  ]
  edge [
    source 22
    target 27
    id "e19"
    distance 383.1362248908658
  ]
  edge [
    source 22
    target 23
    id "e18"
    distance 224.76149342152937
  ]
  edge [
    source 23
    target 29
    id "e17"
    distance 81.55633274476625
  ]
  edge [
    source 24
    target 25
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 629.3124988360909
  ]
  edge [
    source 24
    target 34
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 1732.7850475312403
  ]
  edge [
    source 27
    target 28
    id "e20"
    distance 164.9432131181301
  ]
  edge [
    source 28
    target 29
    id "e16"
    distance 310.30044929373497
  ]
  edge [
    source 30
    target 39
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 209.42265112623548
  ]
  edge [
    source 32
    target 34
    LinkSpeed "2.5"
    LinkLabel "2.5 Gbps"
    LinkSpeedUnits "G"
    capacity 2500000000.0
    distance 2770.9900551148694
  ]
  edge [
    source 33
    target 34
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 709.0660666930014
  ]
  edge [
    source 35
    target 36
    LinkType "Fibre"
    LinkLabel "Lit Fibre"
    LinkNote "Lit "
    distance 937.5896728534278
  ]
  edge [
    source 36
    target 37
    id "e2"
    distance 479.852379679257
  ]
  edge [
    source 38
    target 39
    LinkSpeed "10"
    LinkLabel "10 Gbps"
    LinkSpeedUnits "G"
    capacity 10000000000.0
    distance 262.59365320282353
  ]
]
